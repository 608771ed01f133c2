"""annotations.jsonl (pseudonymous raw annotations) and candidates.jsonl of a release."""

from __future__ import annotations

import shutil
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from django.db.models import TextField
from django.db.models.functions import Cast, Coalesce

from annotation.models import Annotation
from core.streams import stream
from exports.build.records import split_file
from exports.build.tables import ParquetFamily, SpoolPart
from exports.build.ticker import READ_CHUNK, _Ticker
from exports.build.times import IsoUtc, iso_in_sql, iso_utc
from exports.selectors import (
    SplitPlan,
    candidates_by_item,
)
from exports.splitting import SPLITS
from exports.writers import (
    FileDigest,
    HashingFile,
    JsonlWriter,
    json_loads,
    records_arrow_schema,
)
from projects.models import Project


def _annotation_rows(project: Project):
    rows = (
        Annotation.objects.filter(item__project=project, status=Annotation.Status.SUBMITTED)
        .order_by("item_id", "kind", "first_submitted_at", "id")
        # JSON as text, decoded by orjson (Django's JSONField decodes with the stdlib).
        .annotate(values_text=Cast("values", TextField()), provenance_text=Cast("provenance", TextField()))
    )
    head = ("item_id", "annotator_id", "kind", "values_text", "provenance_text", "schema_version")
    if iso_in_sql():
        rows = rows.annotate(
            first_text=IsoUtc(Coalesce("first_submitted_at", "submitted_at")),
            last_text=IsoUtc(Coalesce("submitted_at", "first_submitted_at")),
        )
        return rows.values_list(*head, "guideline_version", "time_spent_ms", "first_text", "last_text"), True
    return rows.values_list(*head, "guideline_version", "time_spent_ms", "first_submitted_at", "submitted_at"), False


@dataclass
class Written:
    """What a JSONL family's writing returns: digests (Parquet included), rows, per split."""

    digests: dict
    count: int
    by_split: dict[str, int]
    parquet: dict
    people: int = 0
    period: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)


def _write_annotations(
    *,
    project: Project,
    plan: SplitPlan,
    dest: Path,
    pseudonyms: dict,
    tick: _Ticker,
    offset: int,
) -> Written:
    """annotations.jsonl and annotations/<split>.jsonl (and their Parquet twins): every
    submitted annotation and audit of a released item, pseudonymous, with its submission order
    and times.

    ``submission_order``: 1, 2, ... per item and kind, by first submission (then id), the order
    adjudication and the agreement report use; ``agreement_slot`` is that order for the first
    ``annotators_per_item`` annotations of an item that has two or more (the records
    agreement.json compares), else null.
    """
    out = JsonlWriter(dest / "annotations.jsonl")
    (dest / "annotations").mkdir()
    per_split = {split: JsonlWriter(dest / split_file("annotations", split, "jsonl")) for split in SPLITS}
    parquet = _parquet_family(project=project, dest=dest, kind="annotations")
    released = 0  # items so far, the progress (no copy of the released ids to rank them)
    rows, as_text = _annotation_rows(project)
    buffer: list[dict] = []
    current = None
    people: set[str] = set()
    slots = project.annotators_per_item
    period = {"first": None, "last": None}

    def flush() -> None:
        compared = sum(1 for r in buffer if r["kind"] == "annotation") >= 2
        for rec in buffer:
            if rec["kind"] == "annotation" and compared and rec["submission_order"] <= slots:
                rec["agreement_slot"] = rec["submission_order"]
            split = rec["split"]
            per_split[split].write_line(out.write(rec))
            parquet.add(rec, split)
            at = rec["submitted_at"]
            if at:
                if period["first"] is None or at < period["first"]:
                    period["first"] = at
                if period["last"] is None or at > period["last"]:
                    period["last"] = at

    order: Counter = Counter()
    split = None
    try:
        for (
            item_id,
            annotator_id,
            kind,
            values,
            provenance,
            schema_version,
            guideline,
            spent,
            first,
            last,
        ) in stream(rows, READ_CHUNK):
            if item_id != current:
                flush()
                buffer, current, order = [], item_id, Counter()
                if tick.due():
                    tick("annotations", offset + released)
                split = plan.split_of(item_id)
                released += split is not None
            if split is None:
                continue
            who = pseudonyms[(kind, annotator_id)]
            people.add(who)
            order[kind] += 1
            buffer.append(
                {
                    "item_id": item_id,
                    "split": split,
                    "annotator": who,
                    "kind": kind,
                    "submission_order": order[kind],
                    "agreement_slot": None,
                    "submitted_at": first if as_text else iso_utc(first or last),
                    "last_submitted_at": last if as_text else iso_utc(last or first),
                    "values": (json_loads(values) if values else None) or {},
                    "provenance": (json_loads(provenance) if provenance else None) or {},
                    "schema_version": schema_version,
                    # The guideline version the annotation was last saved under (guideline.md is the
                    # current text; null: saved before guidelines were versioned).
                    "guideline_version": guideline,
                    "time_spent_ms": spent,
                }
            )
        flush()
    except BaseException:
        parquet.abort()
        raise
    return _close(out, per_split, parquet, kind="annotations", people=len(people), period=period)


def _close(out: JsonlWriter, per_split: dict, parquet: ParquetFamily, *, kind: str, **more) -> Written:
    digests = {f"{kind}.jsonl": out.close()}
    for split, writer in per_split.items():
        digests[split_file(kind, split, "jsonl")] = writer.close()
    results = parquet.close()
    files = {f"{kind}.parquet": results["whole"]} | {
        split_file(kind, split, "parquet"): results[split] for split in SPLITS
    }
    digests |= {name: r.digest for name, r in files.items()}
    by_split = {split: writer.count for split, writer in per_split.items()}
    return Written(digests=digests, count=out.count, by_split=by_split, parquet=files, **more)


def _candidate_writers(*, project: Project, folder: Path) -> tuple[JsonlWriter, dict, ParquetFamily]:
    out = JsonlWriter(folder / "candidates.jsonl")
    (folder / "candidates").mkdir()
    per_split = {split: JsonlWriter(folder / split_file("candidates", split, "jsonl")) for split in SPLITS}
    return out, per_split, _parquet_family(project=project, dest=folder, kind="candidates")


def _candidates_into(
    *,
    project: Project,
    plan: SplitPlan,
    writers: tuple[JsonlWriter, dict, ParquetFamily],
    models: Counter,
    tick: _Ticker,
    offset: int,
    items: tuple[int | None, int | None] = (None, None),
) -> None:
    """Write the candidates of the released items whose ids are in ``items`` ([low, high),
    None: no bound), in item order."""
    out, per_split, parquet = writers
    released = 0  # items so far, the progress
    try:
        for item_id, cands in candidates_by_item(project=project, chunk_size=READ_CHUNK, items=items):
            if tick.due():
                tick("candidates", offset + released)
            split = plan.split_of(item_id)
            if split is None:
                continue
            released += 1
            for c in cands:
                models[(c["provider__name"], c["model_name"])] += 1
                rec = {
                    "item_id": item_id,
                    "split": split,
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
                per_split[split].write_line(out.write(rec))
                parquet.add(rec, split)
    except BaseException:
        parquet.abort()
        raise


def _models_summary(models: Counter) -> dict[str, int]:
    return {f"{p} ({m})": n for (p, m), n in sorted(models.items())}


def _write_candidates(*, project: Project, plan: SplitPlan, dest: Path, tick: _Ticker, offset: int) -> Written:
    """candidates.jsonl (and per split, and Parquet): the latest successful candidate per
    provider, with its model name."""
    writers = _candidate_writers(project=project, folder=dest)
    models: Counter = Counter()
    _candidates_into(project=project, plan=plan, writers=writers, models=models, tick=tick, offset=offset)
    return _close(*writers, kind="candidates", models=_models_summary(models))


#: Parts of the candidates a release's two processes share (exports.build.release): each
#: takes the next part when it is free, so they end within about one part of each other.
CANDIDATE_PARTS = 8


def candidate_part_bounds(plan: SplitPlan, parts: int = CANDIDATE_PARTS) -> list[tuple[int | None, int | None]]:
    """[low, high) item ids of each part: equal numbers of released items, the first part
    open below and the last above (so every item is in exactly one part)."""
    ids = plan.released_ids
    if not len(ids):
        return [(None, None)] + [(0, 0)] * (parts - 1)  # [0, 0): no item
    edges = [None, *(int(ids[len(ids) * k // parts]) for k in range(1, parts)), None]
    return list(zip(edges[:-1], edges[1:]))


@dataclass
class CandidatePart:
    """One part's files (in ``folder``), counts and spooled Parquet rows, picklable."""

    index: int
    folder: Path
    lines: dict[str, int]  # "whole" and each split
    models: Counter
    spool: SpoolPart


def _write_candidate_part(
    *, project: Project, plan: SplitPlan, dest: Path, index: int, items: tuple, tick: _Ticker, offset: int
) -> CandidatePart:
    folder = dest / f".candidates-part-{index}"
    folder.mkdir()
    writers = _candidate_writers(project=project, folder=folder)
    models: Counter = Counter()
    _candidates_into(project=project, plan=plan, writers=writers, models=models, tick=tick, offset=offset, items=items)
    out, per_split, parquet = writers
    out.close()
    for writer in per_split.values():
        writer.close()
    lines = {"whole": out.count} | {split: writer.count for split, writer in per_split.items()}
    return CandidatePart(index, folder, lines, models, parquet.detach())


def _merge_candidates(*, project: Project, dest: Path, parts: list[CandidatePart]) -> Written:
    """The candidate files of ``parts`` (every part, any order) as one writer gives them: each
    JSONL file the parts' files one after the other in item order (whole lines, so the same
    bytes), the Parquet files from the parts' spools in that order."""
    parts = sorted(parts, key=lambda part: part.index)
    if [part.index for part in parts] != list(range(CANDIDATE_PARTS)):  # never a release missing some
        raise RuntimeError(f"candidate parts {[part.index for part in parts]}, not 0 to {CANDIDATE_PARTS - 1}")
    (dest / "candidates").mkdir()
    parquet = _parquet_family(project=project, dest=dest, kind="candidates")
    spools = [part.spool for part in parts]
    if any(spool.straightforward for spool in spools):  # that path reads the joined JSONL files
        digests = _join_candidate_jsonl(dest, parts)
        results = parquet.close_with(spools)
    else:
        # The JSONL files are joined in a thread while this one writes the Parquet files from
        # the spools: reading, writing and hashing release the GIL, so at the end of a build,
        # where the other half is done, the two run on both cores (bench/scale.py: the merge
        # 5.2 -> 2.9 s at 1M items).
        with ThreadPoolExecutor(max_workers=1) as pool:
            joined = pool.submit(_join_candidate_jsonl, dest, parts)
            try:
                results = parquet.close_with(spools)
            finally:
                digests = joined.result()  # waited for either way
    files = {"candidates.parquet": results["whole"]} | {
        split_file("candidates", split, "parquet"): results[split] for split in SPLITS
    }
    digests |= {name: r.digest for name, r in files.items()}
    models: Counter = sum((part.models for part in parts), Counter())
    return Written(
        digests=digests,
        count=sum(part.lines["whole"] for part in parts),
        by_split={split: sum(part.lines[split] for part in parts) for split in SPLITS},
        parquet=files,
        models=_models_summary(models),
    )


def _join_candidate_jsonl(dest: Path, parts: list[CandidatePart]) -> dict[str, FileDigest]:
    digests = {}
    for name in ["candidates.jsonl"] + [split_file("candidates", split, "jsonl") for split in SPLITS]:
        merged = HashingFile(dest / name)
        for part in parts:
            with open(part.folder / name, "rb") as fh:
                while block := fh.read(1 << 20):
                    merged.write(block)
        digests[name] = merged.close()
    for part in parts:
        shutil.rmtree(part.folder)
    return digests


ANNOTATION_COLUMNS = [
    "item_id",
    "split",
    "annotator",
    "kind",
    "submission_order",
    "agreement_slot",
    "submitted_at",
    "last_submitted_at",
    "values",
    "provenance",
    "schema_version",
    "guideline_version",
    "time_spent_ms",
]
CANDIDATE_COLUMNS_OUT = [
    "item_id",
    "split",
    "candidate_id",
    "provider",
    "provider_kind",
    "model_name",
    "prompt_version",
    "fields",
    "removed",
    "think",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
]


def _declared(project: Project, kind: str) -> dict[str, pa.DataType]:
    """Declared Parquet types of annotations or candidates: ``values`` and ``fields`` typed
    like the gold struct (projects.fieldtypes), provenance inferred."""
    gold = records_arrow_schema(project.schema["fields"]).field("gold").type
    string, int64, int32 = pa.string(), pa.int64(), pa.int32()
    if kind == "annotations":
        return {
            "item_id": int64,
            "split": string,
            "annotator": string,
            "kind": string,
            "submission_order": int32,
            "agreement_slot": int32,
            "submitted_at": string,
            "last_submitted_at": string,
            "values": gold,
            "schema_version": int32,
            "guideline_version": int32,
            "time_spent_ms": int64,
        }
    return {
        "item_id": int64,
        "split": string,
        "candidate_id": int64,
        "provider": string,
        "provider_kind": string,
        "model_name": string,
        "prompt_version": string,
        "fields": gold,
        "removed": pa.list_(string),
        "think": string,
        "latency_ms": int64,
        "prompt_tokens": int64,
        "completion_tokens": int64,
    }


def _parquet_family(*, project: Project, dest: Path, kind: str) -> ParquetFamily:
    """Parquet twins of annotations or candidates, whole and per split."""
    return ParquetFamily(
        whole=(dest / f"{kind}.jsonl", dest / f"{kind}.parquet"),
        splits={
            split: (dest / split_file(kind, split, "jsonl"), dest / split_file(kind, split, "parquet"))
            for split in SPLITS
        },
        columns=ANNOTATION_COLUMNS if kind == "annotations" else CANDIDATE_COLUMNS_OUT,
        declared=_declared(project, kind),
    )
