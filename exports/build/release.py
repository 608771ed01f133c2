"""Build every file of a release into a folder, then the manifest (sha256 of every file).

Streaming: the database is read with ``.iterator(chunk_size=...)`` and every file is written
incrementally (exports.writers), so memory is flat in the number of records apart from the
split plan's few numpy arrays per item. Deterministic: records in item order, canonical JSON,
fixed Parquet settings, and the only date in the files is ``data_as_of``, the time of the
newest released gold decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from adjudication.services import lexicon_current
from exports.build.annotations import _write_annotations, _write_candidates
from exports.build.datasheet import datasheet
from exports.build.records import _write_records
from exports.build.ticker import Progress, _Ticker
from exports.selectors import (
    SplitPlan,
    annotator_pseudonyms,
    quality_reports_for_export,
)
from exports.splitting import SPLITS
from exports.writers import (
    FileDigest,
    finite,
    write_json,
    write_text,
)
from metrics import evaluation as offline_evaluation
from projects.evaluation import evaluation_plan
from projects.models import Project

MANIFEST_SCHEMA_VERSION = 1


@dataclass
class BuildResult:
    manifest: dict
    manifest_digest: FileDigest
    record_count: int


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
    # The evaluation code (SPEC section 6): the leaderboard's scorer itself, and its plan.
    digests["evaluate.py"] = write_text(dest / "evaluate.py", Path(offline_evaluation.__file__).read_text("utf-8"))
    digests["evaluation.json"] = write_json(
        dest / "evaluation.json",
        evaluation_plan(
            schema=project.schema,
            preset=project.preset,
            reference_fields=project.get_workflow().reference_fields(),
            release={"project": project.slug},
        ),
    )
    readme = datasheet(manifest=manifest, digests=digests, agreement=agreement, audit=audit, plan=plan)
    readme += offline_evaluation.README_SECTION
    digests["README.md"] = write_text(dest / "README.md", readme)
    manifest["files"] = {name: d.as_dict() for name, d in sorted(digests.items())}
    manifest_digest = write_json(dest / "manifest.json", manifest)
    for path in dest.iterdir():
        if path.is_file():
            path.chmod(0o444)  # published files are never rewritten
    tick("publishing", 3 * n + 1, force=True)
    return BuildResult(manifest=manifest, manifest_digest=manifest_digest, record_count=rec["records"])
