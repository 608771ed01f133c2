"""Build the files of a release into a folder (SPEC section 5). Called by
exports.services.export_job_run, which publishes the folder atomically.

Streaming: the database is read with ``.iterator(chunk_size=...)`` and every file is written
incrementally (exports.writers), so memory is flat in the number of records apart from the
split plan's few numpy arrays per item. Deterministic: records in item order, canonical JSON,
fixed Parquet settings, and the only date in the files is ``data_as_of``, the time of the
newest released gold decision.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from adjudication.services import lexicon_current
from annotation.models import Annotation
from exports.selectors import (
    SplitPlan,
    annotator_pseudonyms,
    candidates_by_item,
    coco_fields,
    quality_reports_for_export,
    released_gold_queryset,
)
from exports.splitting import SPLITS
from exports.writers import (
    UNSPECIFIED_CATEGORY,
    CocoWriter,
    FileDigest,
    JsonlWriter,
    ParquetRecordsWriter,
    finite,
    link_or_copy,
    write_json,
    write_text,
)
from projects.fieldtypes import REGISTRY
from projects.imaging import image_path
from projects.models import Project

MANIFEST_SCHEMA_VERSION = 1
CHUNK = 2000
PROGRESS_EVERY_SECONDS = 0.5

Progress = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass
class BuildResult:
    manifest: dict
    manifest_digest: FileDigest
    record_count: int


class _Ticker:
    """Calls ``progress`` at most every PROGRESS_EVERY_SECONDS (each call is a DB write)."""

    def __init__(self, progress: Progress, total: int):
        self.progress, self.total, self.last = progress, total, 0.0

    def __call__(self, phase: str, done: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= PROGRESS_EVERY_SECONDS:
            self.last = now
            self.progress(phase, min(done, self.total), self.total)


def _pseudonymize_provenance(provenance: dict, pseudonyms: dict) -> dict:
    """Gold provenance with the reviewer's user id replaced by their pseudonym."""
    out = {}
    for name, entry in (provenance or {}).items():
        if isinstance(entry, dict) and "decided_by" in entry:
            entry = {**entry, "decided_by": pseudonyms.get(("reviewer", entry["decided_by"]))}
        out[name] = entry
    return out


def _image_entry(item, included: bool) -> dict:
    ext = item.image.rsplit(".", 1)[-1]
    return {
        "file": f"images/{item.image_sha256}.{ext}" if included else None,
        "format": item.image_format,
        "height": item.height,
        "phash": item.phash,
        "pixel_hash": item.pixel_hash,
        "redistributable": item.redistributable,
        "sha256": item.image_sha256,
        "width": item.width,
    }


def _record(*, gold, item, split: str, group: int, fields: list[dict], pseudonyms: dict, image: dict) -> dict:
    values = gold.values or {}
    return {
        "item_id": item.pk,
        "source_id": item.source_id,
        "source_dataset": item.source_dataset,
        "import_key": item.import_key,
        "text": item.text,
        "title": item.title,
        "language": item.language,
        "domain": item.domain,
        "metadata": item.metadata or {},
        "split": split,
        "near_duplicate_group": group,
        "image": image,
        "gold": {
            f["name"]: REGISTRY[f["type"]].export(f, values.get(f["name"], REGISTRY[f["type"]].absent(f)))
            for f in fields
        },
        "provenance": _pseudonymize_provenance(gold.provenance, pseudonyms),
        "gold_revision": gold.revision,
        "schema_version": gold.schema_version,
        "lexicon_version": gold.lexicon_version,
    }


def _write_records(*, project: Project, plan: SplitPlan, dest: Path, pseudonyms: dict, tick: _Ticker) -> dict:
    """records.jsonl, records.parquet, coco.json, images/ and images.jsonl in one pass."""
    fields = project.schema["fields"]
    boxes_field, category_field = coco_fields(project.schema)
    jsonl = JsonlWriter(dest / "records.jsonl")
    parquet = ParquetRecordsWriter(dest / "records.parquet", fields)
    images_index = JsonlWriter(dest / "images.jsonl")
    (dest / "images").mkdir()
    coco = None
    if boxes_field is not None:
        categories = list(category_field["choices"]) if category_field else []
        if category_field is None or not category_field.get("required"):
            categories.append(UNSPECIFIED_CATEGORY)
        coco = CocoWriter(
            dest / "coco.json",
            categories=categories,
            info={
                "description": f"{project.name}: boxes of field {boxes_field['name']!r}"
                + (f", categories from {category_field['name']!r}" if category_field else ""),
                "box_field": boxes_field["name"],
                "category_field": category_field["name"] if category_field else None,
                "bbox": "pixels [x, y, width, height]; bbox_normalized_1000 = [x1, y1, x2, y2] in [0, 1000]",
            },
        )
    counts = {
        "by_split": Counter(),
        "gold": {f["name"]: Counter() for f in fields if "counted" in REGISTRY[f["type"]].roles},
        "images_included": 0,
        "images_referenced": 0,
        "boxes": 0,
    }
    data_as_of = None
    done = 0
    qs = released_gold_queryset(project=project).select_related("item").order_by("item_id")
    try:
        for gold in qs.iterator(chunk_size=CHUNK):
            item = gold.item
            split = plan.split_of(item.pk)
            if split is None:
                continue  # an exact duplicate removed by the plan, or gold that appeared meanwhile
            included = bool(item.redistributable)
            image = _image_entry(item, included)
            if included:
                src = image_path(item.image)
                link_or_copy(src, dest / image["file"])
                images_index.write(
                    {
                        "file": image["file"],
                        "sha256": item.image_sha256,
                        "bytes": src.stat().st_size,
                        "item_id": item.pk,
                    }
                )
                counts["images_included"] += 1
            else:
                counts["images_referenced"] += 1
            record = _record(
                gold=gold,
                item=item,
                split=split,
                group=plan.group_of_item(item.pk),
                fields=fields,
                pseudonyms=pseudonyms,
                image=image,
            )
            jsonl.write(record)
            parquet.write(record)
            if coco is not None:
                boxes = record["gold"].get(boxes_field["name"]) or []
                category = record["gold"].get(category_field["name"]) if category_field else None
                coco.add(
                    image={
                        "id": item.pk,
                        "file_name": image["file"] or f"sha256:{item.image_sha256}",
                        "width": item.width,
                        "height": item.height,
                        "sha256": item.image_sha256,
                        "source_id": item.source_id,
                        "split": split,
                        "included": included,
                    },
                    boxes=boxes,
                    category=category,
                )
                counts["boxes"] += len(boxes)
            counts["by_split"][split] += 1
            for name, counter in counts["gold"].items():
                counter[str(record["gold"].get(name))] += 1
            if data_as_of is None or gold.created_at > data_as_of:
                data_as_of = gold.created_at
            done += 1
            tick("records", done)
    except BaseException:
        if coco is not None:
            coco.abort()
        raise
    digests = {"records.jsonl": jsonl.close(), "records.parquet": parquet.close(), "images.jsonl": images_index.close()}
    if coco is not None:
        digests["coco.json"] = coco.close()
    counts["records"] = done
    counts["data_as_of"] = data_as_of
    counts["digests"] = digests
    return counts


def _released_rank(plan: SplitPlan) -> Callable[[int], int]:
    ids = plan.released_ids

    def rank(item_id: int) -> int:
        return int(np.searchsorted(ids, item_id))

    return rank


def _write_annotations(
    *, project: Project, plan: SplitPlan, dest: Path, pseudonyms: dict, tick: _Ticker, offset: int
) -> tuple[FileDigest, int, int]:
    """annotations.jsonl: every submitted annotation and audit of a released item, pseudonymous."""
    out = JsonlWriter(dest / "annotations.jsonl")
    rank = _released_rank(plan)
    rows = (
        Annotation.objects.filter(item__project=project, status=Annotation.Status.SUBMITTED)
        .order_by("item_id", "id")
        .values_list("item_id", "annotator_id", "kind", "values", "provenance", "schema_version", "time_spent_ms")
    )
    buffer: list[dict] = []
    current = None
    people: set[str] = set()

    def flush() -> None:
        for rec in sorted(buffer, key=lambda r: (r["kind"], r["annotator"])):
            out.write(rec)

    for item_id, annotator_id, kind, values, provenance, schema_version, time_spent_ms in rows.iterator(
        chunk_size=CHUNK
    ):
        if item_id != current:
            flush()
            buffer, current = [], item_id
            tick("annotations", offset + rank(item_id))
        if plan.split_of(item_id) is None:
            continue
        who = pseudonyms[(kind, annotator_id)]
        people.add(who)
        buffer.append(
            {
                "item_id": item_id,
                "annotator": who,
                "kind": kind,
                "values": values or {},
                "provenance": provenance or {},
                "schema_version": schema_version,
                "time_spent_ms": time_spent_ms,
            }
        )
    flush()
    return out.close(), out.count, len(people)


def _write_candidates(
    *, project: Project, plan: SplitPlan, dest: Path, tick: _Ticker, offset: int
) -> tuple[FileDigest, int, dict]:
    """candidates.jsonl: the latest successful candidate per provider, with its model name."""
    out = JsonlWriter(dest / "candidates.jsonl")
    rank = _released_rank(plan)
    models: Counter = Counter()
    for item_id, cands in candidates_by_item(project=project, chunk_size=CHUNK):
        tick("candidates", offset + rank(item_id))
        if plan.split_of(item_id) is None:
            continue
        for c in cands:
            models[(c["provider__name"], c["model_name"])] += 1
            out.write(
                {
                    "item_id": item_id,
                    "candidate_id": c["id"],
                    "provider": c["provider__name"],
                    "provider_kind": c["provider__kind"],
                    "model_name": c["model_name"],
                    "prompt_version": c["prompt_version"],
                    "fields": c["fields"] or {},
                    "removed": c["removed"] or [],
                    "think": c["think"],
                    "latency_ms": c["latency_ms"],
                    "prompt_tokens": c["prompt_tokens"],
                    "completion_tokens": c["completion_tokens"],
                }
            )
    summary = {f"{p} ({m})": n for (p, m), n in sorted(models.items())}
    return out.close(), out.count, summary


def release_build(*, project: Project, plan: SplitPlan, dest: Path, progress: Progress) -> BuildResult:
    """Write every file of a release into ``dest`` (which must not exist yet)."""
    dest.mkdir(parents=True)
    n = int(plan.released.sum())
    tick = _Ticker(progress, total=3 * n + 1)
    tick("records", 0, force=True)
    pseudonyms = annotator_pseudonyms(project=project)
    rec = _write_records(project=project, plan=plan, dest=dest, pseudonyms=pseudonyms, tick=tick)
    digests: dict[str, FileDigest] = dict(rec.pop("digests"))
    tick("annotations", n, force=True)
    digests["annotations.jsonl"], n_annotations, n_people = _write_annotations(
        project=project, plan=plan, dest=dest, pseudonyms=pseudonyms, tick=tick, offset=n
    )
    tick("candidates", 2 * n, force=True)
    digests["candidates.jsonl"], n_candidates, models = _write_candidates(
        project=project, plan=plan, dest=dest, tick=tick, offset=2 * n
    )
    tick("reports", 3 * n, force=True)

    agreement, audit = quality_reports_for_export(project=project)
    digests["agreement.json"] = write_json(dest / "agreement.json", finite(agreement))
    digests["audit.json"] = write_json(dest / "audit.json", finite(audit))
    splits = plan.as_json()
    digests["splits.json"] = write_json(dest / "splits.json", splits)
    lexicon_version, lexicon = lexicon_current(project=project)
    digests["lexicon.json"] = write_json(dest / "lexicon.json", {"version": lexicon_version, "entries": lexicon})

    data_as_of = rec["data_as_of"].strftime("%Y-%m-%dT%H:%M:%SZ") if rec["data_as_of"] else None
    manifest = {
        "manifest_schema_version": MANIFEST_SCHEMA_VERSION,
        "format": "concord-release",
        "project": {
            "slug": project.slug,
            "name": project.name,
            "preset": project.preset,
            "schema_version": project.schema_version,
        },
        "schema": project.schema,
        "data_as_of": data_as_of,
        "counts": {
            "records": rec["records"],
            "by_split": {s: rec["by_split"].get(s, 0) for s in SPLITS},
            "excluded_exact_duplicates": len(plan.excluded),
            "annotations": n_annotations,
            "annotators": n_people,
            "candidates": n_candidates,
            "images_included": rec["images_included"],
            "images_referenced_only": rec["images_referenced"],
            "boxes": rec["boxes"],
            "gold": {name: dict(sorted(c.items())) for name, c in rec["gold"].items()},
        },
        "near_duplicates": {
            **plan.pairs,
            "threshold": plan.threshold,
            "unreviewed_pairs": plan.pairs["unreviewed"],
            "multi_member_groups": plan.integrity.multi_member_groups,
        },
        "integrity": {
            "ok": plan.integrity.ok,
            "items_checked": plan.integrity.items_checked,
            "pixel_hashes_checked": plan.integrity.pixel_hashes_checked,
            "groups_checked": plan.integrity.groups_checked,
        },
        "split": {"seed": plan.seed, "ratios": splits["ratios"], "strata_fields": plan.strata_fields},
        "lexicon_version": lexicon_version,
        "candidate_models": models,
        "images": {
            "folder": "images/",
            "index": "images.jsonl",
            "rule": "included only when the item's license flag allows redistribution; "
            "otherwise referenced by sha256 and source id",
        },
    }
    readme = datasheet(manifest=manifest, digests=digests, agreement=agreement, audit=audit, plan=plan)
    digests["README.md"] = write_text(dest / "README.md", readme)
    manifest["files"] = {name: d.as_dict() for name, d in sorted(digests.items())}
    manifest_digest = write_json(dest / "manifest.json", manifest)
    for path in dest.iterdir():
        if path.is_file():
            path.chmod(0o444)  # published files are never rewritten
    tick("publishing", 3 * n + 1, force=True)
    return BuildResult(manifest=manifest, manifest_digest=manifest_digest, record_count=rec["records"])


# ------------------------------------------------------------------------------------------
# Datasheet
# ------------------------------------------------------------------------------------------


def _md(value) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text.replace("|", "\\|").replace("\n", " ")


def _figure_rows(rows: list[dict]) -> list[str]:
    out = ["| field | metric | value | 95% CI | n |", "|---|---|---|---|---|"]
    for r in rows:
        ci = r.get("ci")
        ci_text = f"{ci[0]}–{ci[1]}" if isinstance(ci, (list, tuple)) and len(ci) == 2 else "—"
        value = r.get("value")
        out.append(
            f"| {_md(r.get('label') or r.get('field'))} | {_md(r.get('metric', ''))} | "
            f"{'—' if value is None else value} | {ci_text} | {r.get('n', '')} |"
        )
    return out


def _report_lines(report: dict, *, kind: str) -> list[str]:
    """The report's headline figures (quality app format), or why there is none."""
    if "status" in report:
        return [f"Not included: {report.get('reason') or report['status']}."]
    if kind == "agreement":
        lines = [
            f"{report.get('n_items', 0)} items, {report.get('n_annotations', 0)} annotations "
            f"(`agreement.json` has every field's figures with bootstrap CIs)."
        ]
        if report.get("headline"):
            lines += ["", *_figure_rows(report["headline"])]
        return lines
    progress = report.get("progress") or {}
    lines = [
        f"{progress.get('compared', 0)} audited items compared with gold "
        f"(sample of {report.get('size', '?')}, seed {report.get('seed', '?')}; details in `audit.json`)."
    ]
    table9 = report.get("table9") or {}
    if table9.get("rows"):
        lines += ["", *_figure_rows(table9["rows"]), "", f"Unweighted mean: {table9.get('mean')}"]
    return lines


def datasheet(*, manifest: dict, digests: dict, agreement: dict, audit: dict, plan: SplitPlan) -> str:
    c = manifest["counts"]
    p = manifest["project"]
    lines = [
        f"# {p['name']} — dataset release",
        "",
        f"Project `{p['slug']}`, preset `{p['preset']}`, annotation schema v{p['schema_version']}. "
        f"Data as of {manifest['data_as_of'] or 'n/a'} (the newest gold decision in this release).",
        "",
        "## Contents",
        "",
        f"- **{c['records']}** gold records (one per item), {c['excluded_exact_duplicates']} exact pixel duplicates "
        "removed (the earliest copy is kept; see `splits.json` → `excluded`).",
        f"- {c['annotations']} raw annotations by {c['annotators']} pseudonymous people (`annotations.jsonl`).",
        f"- {c['candidates']} model candidates (`candidates.jsonl`).",
        f"- Images: {c['images_included']} included under `images/` (named by sha256, indexed in `images.jsonl`), "
        f"{c['images_referenced_only']} referenced by sha256 and source id only (license does not allow "
        "redistribution).",
        "",
        "## Splits",
        "",
        f"Seed {plan.seed}, ratios "
        + ", ".join(f"{k} {v:g}" for k, v in manifest["split"]["ratios"].items())
        + ", stratified by "
        + (", ".join(f"`{f}`" for f in plan.strata_fields) or "nothing (no choice field)")
        + ", assigned per near-duplicate group.",
        "",
        "| split | records |",
        "|---|---|",
        *[f"| {s} | {n} |" for s, n in c["by_split"].items()],
        "",
    ]
    table = plan.stratum_table()
    if table and plan.strata_fields:
        lines += [
            "| " + " | ".join(plan.strata_fields) + " | " + " | ".join(SPLITS) + " | total |",
            "|" + "---|" * (len(plan.strata_fields) + len(SPLITS) + 1),
        ]
        for row in table:
            lines.append(
                "| "
                + " | ".join(_md(v) for v in row["stratum"].values())
                + " | "
                + " | ".join(str(row["counts"][s]) for s in SPLITS)
                + f" | {row['total']} |"
            )
        lines.append("")
    nd = manifest["near_duplicates"]
    integrity = manifest["integrity"]
    lines += [
        "## Split integrity",
        "",
        f"Perceptual-hash near-duplicate pairs within Hamming distance {nd['threshold']}: {nd['same']} judged the same "
        f"meme, {nd['different']} judged different, **{nd['unreviewed_pairs']} unreviewed** (treated as the same "
        f"group: a leak between splits is worse than a slightly uneven split). {nd['multi_member_groups']} groups "
        "have more than one member.",
        "",
        f"Integrity check: **{'passed' if integrity['ok'] else 'FAILED'}** — no pixel hash and no near-duplicate "
        f"group spans two splits ({integrity['items_checked']} items, {integrity['pixel_hashes_checked']} pixel "
        f"hashes, {integrity['groups_checked']} groups checked; details in `splits.json`).",
        "",
        "## Agreement (before adjudication)",
        "",
        *_report_lines(agreement, kind="agreement"),
        "",
        "## Candidate-blind audit",
        "",
        *_report_lines(audit, kind="audit"),
        "",
        "## Lexicon and models",
        "",
        f"Entity lexicon version {manifest['lexicon_version']} is frozen in `lexicon.json`.",
        "",
        "Candidate models (provider (model): candidates): "
        + (", ".join(f"{k}: {v}" for k, v in manifest["candidate_models"].items()) or "none")
        + ".",
        "",
        "## Gold label counts",
        "",
        *[
            f"- `{name}`: " + ", ".join(f"{_md(k)} {v}" for k, v in counts.items())
            for name, counts in c["gold"].items()
        ],
        "",
        "## Files",
        "",
        "| file | bytes | sha256 |",
        "|---|---|---|",
        *[f"| `{name}` | {d.bytes} | `{d.sha256}` |" for name, d in sorted(digests.items())],
        "",
        "`manifest.json` lists the sha256 of every file including this one.",
        "",
        "## Record format",
        "",
        "`records.jsonl` (and the same columns in `records.parquet`): `item_id`, `source_id`, `source_dataset`, "
        "`import_key`, `text`, `title`, `language`, `domain`, `metadata`, `split` (train/val/test), "
        "`near_duplicate_group` (item id of the group's first member), `image` {sha256, pixel_hash, phash, width, "
        "height, format, file (null when not redistributable), redistributable}, `gold` (one key per schema field), "
        "`provenance` (per field: identical / reviewer / auto-merge; reviewers pseudonymous; JSON text in Parquet), "
        "`gold_revision`, `schema_version`, `lexicon_version`. Boxes are `[x1, y1, x2, y2]` normalized to "
        "[0, 1000]; `coco.json` has them in pixels.",
        "",
    ]
    return "\n".join(lines)
