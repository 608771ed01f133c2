"""annotations.jsonl (pseudonymous raw annotations) and candidates.jsonl of a release."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from annotation.models import Annotation
from exports.build.ticker import READ_CHUNK, _Ticker
from exports.selectors import (
    SplitPlan,
    candidates_by_item,
)
from exports.writers import (
    FileDigest,
    JsonlWriter,
)
from projects.models import Project


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
        chunk_size=READ_CHUNK
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
    for item_id, cands in candidates_by_item(project=project, chunk_size=READ_CHUNK):
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
