"""Build every file of a release into a folder, then the manifest (sha256 of every file).

Streaming: the database is read in chunks as PostgreSQL produces them (core.streams: a
server-side cursor of a reading connection of its own) and every file is written
incrementally (exports.writers), so memory is flat in the number of records apart from the
split plan's few numpy arrays per item. Deterministic: records in item order, canonical JSON,
fixed Parquet settings, and the only date in the files is ``data_as_of``, the time of the
newest released gold decision.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path

from django.db import connections

from adjudication.services import lexicon_current
from candidates.prompts import prompt_for_project
from core.forked import Claims, Forked, fork_possible
from exports.build.agreement import release_agreement
from exports.build.annotations import (
    CANDIDATE_PARTS,
    CandidatePart,
    _merge_candidates,
    _write_annotations,
    _write_candidate_part,
    _write_candidates,
    candidate_part_bounds,
)
from exports.build.croissant import croissant
from exports.build.datasheet import CARD_CONFIGS, card_front_matter, datasheet
from exports.build.records import HF_SPLIT, _write_records, split_file
from exports.build.tables import hf_feature_yaml
from exports.build.ticker import Progress, _Ticker
from exports.selectors import (
    SplitPlan,
    annotator_pseudonyms,
    audit_for_export,
    construction_counts,
    exclusions_by_reason,
    release_card_settings,
)
from exports.splitting import SPLITS
from exports.writers import (
    FileDigest,
    finite,
    write_json,
    write_text,
)
from lib.gcpause import gc_paused
from lib.memory import release_free_memory
from metrics import evaluation as offline_evaluation
from projects.evaluation import evaluation_plan
from projects.models import Project
from studies.release import RELEASE_FILE as STUDY_FILE
from studies.release import datasheet_section as study_section
from studies.release import release_studies

MANIFEST_SCHEMA_VERSION = 2


@dataclass
class BuildResult:
    manifest: dict
    manifest_digest: FileDigest
    record_count: int


class ReleaseInputs:
    """What a build reads before its parts start: the card settings and the pseudonyms, two
    aggregate queries over every item and annotation (~1.5 s of PostgreSQL each at 1M items,
    with the other core idle). Where the parts run in parallel (core.forked.fork_possible:
    PostgreSQL, outside a transaction, so a thread sees the same rows) they are read in a
    thread, begun before the near-duplicate scan and the split plan, over its own connection;
    elsewhere when asked."""

    def __init__(self, project: Project):
        self.project = project
        self._value: tuple | None = None
        self._thread: threading.Thread | None = None
        if fork_possible():
            self._thread = threading.Thread(target=self._read_in_thread, name="release-inputs", daemon=True)
            self._thread.start()

    def _read(self) -> tuple[dict, dict]:
        return release_card_settings(project=self.project), annotator_pseudonyms(project=self.project)

    def _read_in_thread(self) -> None:
        try:
            self._value = ("ok", self._read())
        except BaseException as exc:  # raised where the build asks for the inputs
            self._value = ("error", exc)
        finally:
            connections.close_all()  # this thread's own (Django's connections are per thread)

    def get(self) -> tuple[dict, dict]:
        """(card settings, pseudonyms); the thread, if any, has ended when this returns (so a
        fork after it copies no thread in the middle of a query)."""
        if self._thread is None:
            return self._read()
        self._thread.join()
        kind, value = self._value
        if kind == "error":
            raise value
        return value


def _release_files_readonly(dest: Path) -> None:
    for path in dest.rglob("*"):
        if path.is_file():
            path.chmod(0o444)  # published files are never rewritten


def _features(results: dict) -> dict[str, list[dict]]:
    """The card's features per config, from the train split's Parquet schema (every split of a
    config has the same types: exports.build.tables.split_twin)."""
    out = {}
    for config, folder in CARD_CONFIGS:
        schema = results[split_file(folder, "train", "parquet")].schema
        out[config] = [hf_feature_yaml(f.name, f.type, image=f.name == "image_data") for f in schema]
    return out


def _candidate_parts(
    *, project: Project, plan: SplitPlan, dest: Path, claims: Claims, tick: _Ticker, offset: int
) -> tuple[list[CandidatePart], int]:
    """Write the candidate parts this process takes, until none is left: (the parts, the
    progress reached)."""
    bounds = candidate_part_bounds(plan)
    step = int(plan.released.sum()) // len(bounds)
    parts, done = [], offset
    while (k := claims.take()) is not None:
        tick("candidates", offset + k * step, force=True)
        parts.append(
            _write_candidate_part(
                project=project, plan=plan, dest=dest, index=k, items=bounds[k], tick=tick, offset=offset + k * step
            )
        )
        done = offset + (k + 1) * step
    return parts, done


def _tables(
    *,
    project: Project,
    plan: SplitPlan,
    dest: Path,
    pseudonyms: dict,
    tick: _Ticker | None = None,
    candidate_claims: Claims | None = None,
):
    """annotations.*, candidates.* (files in ``dest``) and the agreement figures of the
    released items: (annotations result, candidates result, agreement dict). With
    ``candidate_claims`` (a forked part), the candidates are the parts it took (a list of
    CandidatePart, the parent merges them with its own), else the written files' result."""
    n = int(plan.released.sum())
    tick = tick or _Ticker(lambda *_: None, total=3 * n + 1)  # a forked part: the parent reports
    # The agreement figures first: forked, their peak then meets the records' streaming, not
    # the records' Parquet close (which holds every row group's metadata), bench/scale.py.
    tick("agreement figures", n, force=True)
    agreement = release_agreement(project=project, plan=plan)
    release_free_memory()  # each part's free heap pages, before the next part's peak
    tick("annotations", n, force=True)
    annotations = _write_annotations(project=project, plan=plan, dest=dest, pseudonyms=pseudonyms, tick=tick, offset=n)
    release_free_memory()
    if candidate_claims is not None:
        parts, _ = _candidate_parts(
            project=project, plan=plan, dest=dest, claims=candidate_claims, tick=tick, offset=2 * n
        )
        return annotations, parts, agreement
    tick("candidates", 2 * n, force=True)
    candidates = _write_candidates(project=project, plan=plan, dest=dest, tick=tick, offset=2 * n)
    return annotations, candidates, agreement


@gc_paused()
def release_build(
    *, project: Project, plan: SplitPlan, dest: Path, progress: Progress, inputs: ReleaseInputs | None = None
) -> BuildResult:
    """Write every file of a release into ``dest`` (which must not exist yet). The files never
    name the release's number: the same data gives the same bytes (and manifest sha256).
    ``inputs``: the card settings and pseudonyms, when the caller began reading them early."""
    dest.mkdir(parents=True)
    n = int(plan.released.sum())
    tick = _Ticker(progress, total=3 * n + 1)
    tick("records", 0, force=True)
    card, pseudonyms = (inputs or ReleaseInputs(project)).get()
    guideline = project.guideline or ""
    guideline_version = hashlib.sha256(guideline.encode()).hexdigest()[:12]
    prompt = prompt_for_project(project)
    # The records and the rest (annotations, candidates, agreement figures) read and write
    # disjoint things: on PostgreSQL, outside a transaction, the rest runs in a forked process
    # on the other core (core.forked; bench/scale.py), else after the records, in this one.
    # The candidates are parts (by item range) that either process takes when it is free, then
    # merged here: at 1M items the records end ~10-20 s before the forked part's annotations.
    release_free_memory()  # the split plan's temporaries: the forked part would share them
    part = claims = None
    if fork_possible():
        claims = Claims(CANDIDATE_PARTS)
        part = Forked(_tables, project=project, plan=plan, dest=dest, pseudonyms=pseudonyms, candidate_claims=claims)
    try:
        rec = _write_records(project=project, plan=plan, dest=dest, pseudonyms=pseudonyms, tick=tick, card=card)
        release_free_memory()
        if part is not None:
            # The progress: records, then candidate parts, never going back.
            mine, done = _candidate_parts(project=project, plan=plan, dest=dest, claims=claims, tick=tick, offset=n)
            phase = "annotations, agreement and candidates"
            tick(phase, done, force=True)
            annotations, theirs, agreement = part.result(waiting=lambda: tick(phase, done))
            tick("candidates", done, force=True)
            candidates = _merge_candidates(project=project, dest=dest, parts=mine + theirs)
        else:
            annotations, candidates, agreement = _tables(
                project=project, plan=plan, dest=dest, pseudonyms=pseudonyms, tick=tick
            )
    finally:
        if part is not None:
            part.stop()
            claims.close()
    digests: dict[str, FileDigest] = dict(rec.pop("digests"))
    digests.update(annotations.digests)
    digests.update(candidates.digests)
    tick("reports", 3 * n, force=True)
    parquet = {**rec.pop("parquet"), **annotations.parquet, **candidates.parquet}
    audit = audit_for_export(project=project)
    digests["agreement.json"] = write_json(dest / "agreement.json", finite(agreement))
    digests["audit.json"] = write_json(dest / "audit.json", finite(audit))
    splits = plan.as_json()
    digests["splits.json"] = write_json(dest / "splits.json", splits)
    lexicon_version, lexicon = lexicon_current(project=project)
    digests["lexicon.json"] = write_json(dest / "lexicon.json", {"version": lexicon_version, "entries": lexicon})
    digests["guideline.md"] = write_text(dest / "guideline.md", guideline.rstrip() + "\n" if guideline else "")
    digests["prompt.txt"] = write_text(dest / "prompt.txt", prompt.system.rstrip() + "\n")
    # The reference-independence study (studies app), when the project ran one.
    studies = release_studies(project=project)
    if studies is not None:
        digests[STUDY_FILE] = write_json(dest / STUDY_FILE, finite(studies))

    data_as_of = rec["data_as_of"][:19] + "Z" if rec["data_as_of"] else None  # to the second
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
        # Fields whose gold is the list of every annotator's value (a references workflow).
        "reference_fields": project.get_workflow().reference_fields(),
        "card": card,
        "data_as_of": data_as_of,
        "annotators_per_item": project.annotators_per_item,
        "guideline": {
            "file": "guideline.md",
            "version": guideline_version,
            "version_rule": "sha256[:12] of the text",
            # The project's version number of this text; annotations name the one they were saved under.
            "project_version": project.guideline_version,
        },
        "prompt": {"file": "prompt.txt", "version": prompt.version},
        "annotation_period": annotations.period,
        "counts": {
            "records": rec["records"],
            "by_split": {s: rec["by_split"].get(s, 0) for s in SPLITS},
            "annotations_by_split": annotations.by_split,
            "candidates_by_split": candidates.by_split,
            "excluded_exact_duplicates": len(plan.excluded),
            "annotations": annotations.count,
            "annotators": annotations.people,
            "candidates": candidates.count,
            "images_included": rec["images_included"],
            "image_variants_included": rec["variants_included"],
            "images_referenced_only": rec["images_referenced"],
            "boxes": rec["boxes"],
            "boxes_by_split": {s: rec["boxes_by_split"].get(s, 0) for s in SPLITS},
            # {field: {split: {references per item: items}}} for fields kept as references.
            "references_by_split": {
                name: {s: {str(k): n for k, n in sorted(c.items())} for s, c in by_split.items() if c}
                for name, by_split in rec["references"].items()
            },
            "gold": {name: dict(sorted(c.items())) for name, c in rec["gold"].items()},
        },
        "exclusions_by_reason": exclusions_by_reason(project=project),
        # Workflows that review a model's output (vikr): removals by reason and stage, accepted vs edited.
        "construction": construction_counts(project=project),
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
        "split": {
            "seed": plan.seed,
            "ratios": splits["ratios"],
            "strata_fields": plan.strata_fields,
            "pinned_items": plan.pinned,
            "shortfalls": plan.shortfalls,
            "files": {s: HF_SPLIT[s] for s in SPLITS},
        },
        "json_text_columns": sorted({f"{name}:{c}" for name, r in parquet.items() for c in r.json_text_columns}),
        "lexicon_version": lexicon_version,
        "candidate_models": candidates.models,
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
    digests["croissant.json"] = write_json(dest / "croissant.json", croissant(manifest=manifest, digests=digests))
    readme = card_front_matter(manifest=manifest, features=_features(parquet)) + datasheet(
        manifest=manifest, digests=digests, agreement=agreement, audit=audit, plan=plan
    )
    readme += study_section(studies)
    readme += offline_evaluation.README_SECTION
    digests["README.md"] = write_text(dest / "README.md", readme)
    manifest["files"] = {name: d.as_dict() for name, d in sorted(digests.items())}
    manifest_digest = write_json(dest / "manifest.json", manifest)
    _release_files_readonly(dest)
    tick("publishing", 3 * n + 1, force=True)
    return BuildResult(manifest=manifest, manifest_digest=manifest_digest, record_count=rec["records"])
