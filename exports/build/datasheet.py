"""The datasheet README of a release."""

from __future__ import annotations

import json

import yaml

from exports.build.records import HF_SPLIT, split_file
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


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "1M<n<10M" if n < 10_000_000 else "n>10M"


#: Configs of the card: (config name, folder), one data file per split (Parquet: typed).
CARD_CONFIGS = (("records", "records"), ("annotations", "annotations"), ("candidates", "candidates"))


def card_front_matter(*, manifest: dict, features: dict[str, list[dict]]) -> str:
    """The YAML block Hugging Face reads: license, languages, tasks, size, configs with a data
    file per split (``datasets.load_dataset(folder)`` gives train/validation/test) and the
    features of every config (``features``: config -> datasets' YAML feature list)."""
    card = manifest["card"]
    c = manifest["counts"]
    meta: dict = {"pretty_name": card["pretty_name"], "license": card["license"]}
    if card.get("license_name"):
        meta["license_name"] = card["license_name"]
    if card.get("license_url"):
        meta["license_link"] = card["license_url"]
    if card["languages"]:
        meta["language"] = card["languages"]
    meta["task_categories"] = card["task_categories"]
    meta["size_categories"] = [_size_category(c["records"])]
    meta["tags"] = ["memes", "multimodal", "concord", manifest["project"]["preset"] or "custom"]
    split_counts = {
        "records": c["by_split"],
        "annotations": c["annotations_by_split"],
        "candidates": c["candidates_by_split"],
    }
    # An empty split is left out of its config (``datasets`` refuses a split without rows);
    # its empty file is still in the release.
    present = {name: [s for s in SPLITS if split_counts[name].get(s, 0)] for name, _ in CARD_CONFIGS}
    meta["configs"] = [
        {
            "config_name": name,
            **({"default": True} if name == "records" else {}),
            "data_files": [{"split": HF_SPLIT[s], "path": split_file(folder, s, "parquet")} for s in present[name]],
        }
        for name, folder in CARD_CONFIGS
        if present[name]
    ]
    meta["dataset_info"] = [
        {
            "config_name": name,
            "features": features[name],
            "splits": [{"name": HF_SPLIT[s], "num_examples": int(split_counts[name][s])} for s in present[name]],
        }
        for name, _ in CARD_CONFIGS
        if present[name]
    ]
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000) + "---\n\n"


def _para(text: str, missing: str) -> list[str]:
    return [text.strip() if text and text.strip() else f"_{missing}_", ""]


def _construction_lines(c: dict | None) -> list[str]:
    """Construction with a reviewed model stage (MemeBench: 1,500 candidates -> 1,253, 247
    removed in QC): removals by reason and stage, reviewed items accepted or edited."""
    if not c:
        return []
    lines = [
        f"Construction: {c['items']} candidate items, {c['removed']} removed, {c['kept']} kept "
        f"(released or still in progress). Of the reviewed items, {c['reviewed_accepted']} "
        f"{'was' if c['reviewed_accepted'] == 1 else 'were'} accepted as converted by the model and "
        f"{c['reviewed_edited']} edited by the reviewer.",
        "",
    ]
    if c.get("converted_by"):
        lines += [
            "Converted by the model stage (provider (model reported): items): "
            + "; ".join(
                f"{_md(r['stage'])}: {_md(r['provider'])} ({_md(r['model'])}): {r['items']}" for r in c["converted_by"]
            ),
            "",
        ]
    if c.get("reviewed_fields_edited"):
        lines += ["Edited fields: " + ", ".join(f"{_md(k)} {n}" for k, n in c["reviewed_fields_edited"].items()), ""]
    if c.get("removed_by_stage"):
        lines += ["| stage | reason | items removed |", "|---|---|---|"]
        for stage, reasons in c["removed_by_stage"].items():
            lines += [f"| {_md(stage)} | {_md(reason)} | {n} |" for reason, n in reasons.items()]
        lines += [""]
    return lines


def datasheet(*, manifest: dict, digests: dict, agreement: dict, audit: dict, plan: SplitPlan) -> str:
    """The card body: a datasheet (Gebru et al., "Datasheets for Datasets": motivation,
    composition, collection, preprocessing, uses, distribution, maintenance) filled from the
    project's release settings (snapshotted in ``manifest["card"]``) and the release's data."""
    c = manifest["counts"]
    p = manifest["project"]
    card = manifest.get("card") or {}
    unset = "Not stated by the dataset's maintainers (project release settings)."
    shortfalls = manifest["split"].get("shortfalls") or []
    lines = [
        f"# {card.get('pretty_name') or p['name']}",
        "",
    ]
    if card.get("content_warning"):
        lines += [f"> **Content warning.** {card['content_warning']}", ""]
    lines += [
        *_para(
            card.get("summary", ""), f"A dataset of memes (image + text) annotated with the `{p['preset']}` schema."
        ),
        f"A release of Concord project `{p['slug']}`, preset `{p['preset']}`, "
        f"annotation schema v{p['schema_version']}, guideline version `{manifest['guideline']['version']}`. "
        f"Data as of {manifest['data_as_of'] or 'n/a'} (the newest gold decision in this release).",
        "",
        "```python",
        "from datasets import load_dataset",
        'records = load_dataset("path/to/this/folder")  # train / validation / test, images as an Image feature',
        'annotations = load_dataset("path/to/this/folder", "annotations")  # raw per-annotator records',
        'candidates = load_dataset("path/to/this/folder", "candidates")  # model candidates with model names',
        "```",
        "",
        "Also here: `croissant.json` (Croissant 1.0 with RAI fields), per-split JSONL and Parquet, COCO per split, "
        "and the guideline and candidate prompt the annotators and models worked from.",
        "",
    ]
    if shortfalls:
        lines += [
            "> **Split warning.** "
            + "; ".join(
                f"the {s['split']} split has {s['actual']} items where the ratios ask for {s['asked']}"
                for s in shortfalls
            )
            + " (near-duplicate groups or splits pinned by the workflow leave no closer assignment).",
            "",
        ]
    lines += [
        "## Motivation",
        "",
        "**For what purpose was the dataset created?**",
        "",
        *_para(card.get("motivation", ""), unset),
        "**Who created the dataset?**",
        "",
        *(["".join(f"- {name}\n" for name in card["creators"])] if card.get("creators") else _para("", unset)),
        "**Who funded the creation of the dataset?**",
        "",
        *_para(card.get("funding", ""), unset),
        "## Composition",
        "",
        f"Each instance is a meme: an image and its text (plus title, source dataset and id, language, domain and "
        f"metadata where given), with one adjudicated gold record of the schema's fields "
        f"({', '.join('`' + f['name'] + '`' for f in manifest['schema']['fields'])}).",
        "",
        f"- **{c['records']}** gold records (one per item), {c['excluded_exact_duplicates']} exact pixel duplicates "
        "removed (the earliest copy is kept; see `splits.json` → `excluded`).",
        f"- {c['annotations']} raw annotations by {c['annotators']} pseudonymous people (`annotations/`).",
        f"- {c['candidates']} model candidates (`candidates/`).",
        f"- Images: {c['images_included']} included under `images/` (named by sha256, indexed in `images.jsonl`), "
        f"{c['images_referenced_only']} referenced by sha256 and source id only (their license does not allow "
        "redistribution; they are in no file of this release).",
        *(
            [
                f"- Derived images: {c['image_variants_included']} text-free variants (the OCR boxes painted out; "
                "what the literal-caption round looked at) under `images/`, indexed by item in `variants.jsonl`, "
                "for redistributable items only."
            ]
            if c.get("image_variants_included")
            else []
        ),
        *_references_lines(c.get("references_by_split") or {}),
        "",
    ]
    exclusions = manifest.get("exclusions_by_reason") or {}
    if exclusions:
        lines += ["Items taken out of the dataset before release, by reason:", "", "| reason | items |", "|---|---|"]
        lines += [f"| {_md(reason)} | {n} |" for reason, n in exclusions.items()]
        lines += [""]
    lines += _construction_lines(manifest.get("construction"))
    lines += [
        "**Does the dataset contain data that might be offensive or upsetting?** Yes: "
        + (card.get("content_warning") or "memes collected to study harmful content.").strip(),
        "",
        "**Does it contain personal or sensitive information?**",
        "",
        *_para(card.get("personal_information", ""), unset),
        "### Splits",
        "",
        f"Seed {plan.seed}, ratios "
        + ", ".join(f"{k} {v:g}" for k, v in manifest["split"]["ratios"].items())
        + ", stratified by "
        + (", ".join(f"`{f}`" for f in plan.strata_fields) or "nothing (no choice field)")
        + ", sizes by largest remainder, assigned per near-duplicate group"
        + (f"; {plan.pinned} items keep the split the workflow pinned on them" if plan.pinned else "")
        + ".",
        "",
        "| split | Hugging Face split | records | annotations | candidates |",
        "|---|---|---|---|---|",
        *[
            f"| {s} | {HF_SPLIT[s]} | {c['by_split'].get(s, 0)} | {c['annotations_by_split'].get(s, 0)} | "
            f"{c['candidates_by_split'].get(s, 0)} |"
            for s in SPLITS
        ],
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
        "### Gold label counts",
        "",
        *[
            f"- `{name}`: " + ", ".join(f"{_md(k)} {v}" for k, v in counts.items())
            for name, counts in c["gold"].items()
        ],
        "",
        "## Collection process",
        "",
        *_para(card.get("collection", ""), unset),
        f"**Annotation.** Each item was annotated independently by {manifest['annotators_per_item']} distinct "
        'annotators, who saw the guideline (`guideline.md`) and model candidates shown anonymously ("Candidate '
        "A/B/C\", in an order randomized per item and annotator), never each other's work. Disagreements went to "
        "a reviewer who had not annotated the item; identical annotations became gold without review. Every gold "
        "field records its provenance (identical / reviewer / auto-merge rule).",
        "",
        "**Who were the annotators?**",
        "",
        *_para(card.get("annotators", ""), unset),
        f"Annotator ids are pseudonyms (`annotator-01`, ...), stable within the project. Annotations were "
        f"submitted between {manifest['annotation_period']['first'] or 'n/a'} and "
        f"{manifest['annotation_period']['last'] or 'n/a'}.",
        "",
        "## Preprocessing, cleaning and labeling",
        "",
        "- Exact duplicates (same decoded pixels) removed, the earliest copy kept.",
        f"- Perceptual-hash near-duplicate pairs within Hamming distance {nd['threshold']}: {nd['same']} judged the "
        f"same meme, {nd['different']} judged different, **{nd['unreviewed_pairs']} unreviewed** (treated as the same "
        f"group: a leak between splits is worse than a slightly uneven split). {nd['multi_member_groups']} groups "
        "have more than one member; a group never spans two splits.",
        f"- Integrity check: **{'passed' if integrity['ok'] else 'FAILED'}** ({integrity['items_checked']} items, "
        f"{integrity['pixel_hashes_checked']} pixel hashes, {integrity['groups_checked']} groups checked; "
        "`splits.json`).",
        "- Model candidates were parsed and normalized to the schema; malformed fields were removed (listed in "
        "`removed`), never the whole candidate. The prompt is `prompt.txt` (version "
        f"`{manifest['prompt']['version']}`).",
        f"- Entity lexicon version {manifest['lexicon_version']} (variant → canonical form) is frozen in "
        "`lexicon.json`.",
        "- Candidate models (provider (model): candidates): "
        + (", ".join(f"{k}: {v}" for k, v in manifest["candidate_models"].items()) or "none")
        + ".",
        "",
        "### Agreement before adjudication",
        "",
        *_report_lines(agreement, kind="agreement"),
        "",
        "Computed over exactly the items of this release whose annotations it ships: every figure can be "
        "recomputed from `annotations.jsonl` (records with `agreement_slot`), `lexicon.json` and the schema in "
        "`manifest.json`.",
        "",
        "### Candidate-blind audit",
        "",
        *_report_lines(audit, kind="audit"),
        "",
        "## Uses",
        "",
        "**Intended uses.**",
        "",
        *_para(card.get("intended_uses", ""), unset),
        "**Uses to avoid.**",
        "",
        *_para(card.get("prohibited_uses", ""), unset),
        "**Known limitations and biases.**",
        "",
        *_para(card.get("limitations", ""), unset),
        "## Distribution",
        "",
        f"License: **{card.get('license_name') or card.get('license', 'other')}**"
        + (f" ({card['license_url']})" if card.get("license_url") else "")
        + ". Images are shipped only where the source's license allows redistribution.",
        "",
        "One archive of every file (`GET /api/projects/<slug>/releases/<n>/archive`, a stored zip; resumable "
        "with Range) or file by file (`/files/<name>`); the archive's sha256 is in the release's API manifest "
        "(`archive`).",
        "",
        "## Maintenance",
        "",
        *_para(card.get("maintenance", ""), unset),
        f"Contact: {card.get('contact') or unset}",
        "",
        "Releases are immutable and numbered (v1, v2, ...); the release page lists what changed between two.",
        "",
    ]
    if card.get("citation"):
        lines += ["## Citation", "", "```bibtex", card["citation"].strip(), "```", ""]
    lines += [
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
        "`records/<split>.jsonl` and `.parquet` (all splits together: `records.jsonl` / `records.parquet`): "
        "`item_id`, `source_id`, `source_dataset`, `import_key`, `text`, `title`, `language`, `domain`, `metadata`, "
        "`split` (train/val/test), `near_duplicate_group` (item id of the group's first member), `image` {sha256, "
        "pixel_hash, phash, width, height, format, file (null when not redistributable), redistributable}, `gold` "
        "(one key per schema field), `provenance` (per field: identical / reviewer / auto-merge; reviewers "
        "pseudonymous), `gold_revision`, `schema_version`, `lexicon_version`; the per-split Parquet files add "
        "`image_data` (the image bytes, Hugging Face Image feature; null when not redistributable). Nested values "
        "are nested Parquet columns (structs, lists); a key absent in JSONL is null in Parquet"
        + (
            f" (JSON text, values too mixed for one type: {', '.join(manifest['json_text_columns'])})"
            if manifest.get("json_text_columns")
            else ""
        )
        + ". Boxes are `[x1, y1, x2, y2]` normalized to [0, 1000]; `coco/<split>.json` has them in pixels, with "
        "their polygon in `segmentation`.",
        "",
        "`annotations/<split>.*`: `item_id`, `split`, `annotator` (pseudonym), `kind` (annotation / audit), "
        "`submission_order` (per item and kind), `agreement_slot`, `submitted_at` and `last_submitted_at` (UTC), "
        "`values`, `provenance` (candidate letters taken), `schema_version` (the schema the annotation was saved "
        "under), `guideline_version` (the project's guideline version the annotation was last saved under; "
        "`guideline.md` is the version in force when this release was built, named in `manifest.json`), "
        "`time_spent_ms`.",
        "",
    ]
    return "\n".join(lines)


def _references_lines(refs: dict) -> list[str]:
    """Fields kept as references (every annotator's value, no adjudication): how many per item
    in each split (MemeCap: one meme caption per train item, more per test item)."""
    lines = []
    for name, by_split in refs.items():
        parts = []
        for split, hist in by_split.items():
            shown = ", ".join(f"{n} item{'s' if n != 1 else ''} with {k}" for k, n in hist.items())
            parts.append(f"{split}: {shown}")
        lines.append(f"- `{name}` keeps every annotator's value as a list of references ({'; '.join(parts)}).")
    return lines
