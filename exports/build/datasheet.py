"""The datasheet README of a release."""

from __future__ import annotations

import json

from exports.selectors import (
    SplitPlan,
)
from exports.splitting import SPLITS

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
