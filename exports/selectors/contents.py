"""What a release holds besides the records: pseudonyms of annotators, candidates by item, the
audit report.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Min, TextField
from django.db.models.functions import Cast, Coalesce

from adjudication.models import GoldRecord
from annotation.models import Annotation
from candidates.models import Candidate
from core.streams import stream
from exports.writers import json_loads
from projects.models import Project
from quality.audits import audit_report_for_export

# ------------------------------------------------------------------------------------------
# Pseudonyms
# ------------------------------------------------------------------------------------------

PSEUDONYM_PREFIX = {"annotation": "annotator", "audit": "auditor"}


def annotator_pseudonyms(*, project: Project) -> dict[tuple[str, int], str]:
    """{(kind, user id): "annotator-01" / "auditor-01" / "reviewer-01"} for the project.

    Numbered by each person's first submission (first gold decision for reviewers), ties by
    user id: a person keeps their number as the project grows, and usernames never leave.
    """
    out: dict[tuple[str, int], str] = {}
    rows = (
        Annotation.objects.filter(item__project=project, status=Annotation.Status.SUBMITTED)
        .values("kind", "annotator_id")
        .annotate(first=Min(Coalesce("first_submitted_at", "submitted_at", "created_at")))
        .order_by("kind", "first", "annotator_id")
    )
    numbers: dict[str, int] = {}
    for r in rows:
        prefix = PSEUDONYM_PREFIX.get(r["kind"], r["kind"])
        numbers[prefix] = numbers.get(prefix, 0) + 1
        out[(r["kind"], r["annotator_id"])] = f"{prefix}-{numbers[prefix]:02d}"
    reviewers = (
        GoldRecord.objects.filter(item__project=project, decided_by__isnull=False)
        .values("decided_by_id")
        .annotate(first=Min("created_at"))
        .order_by("first", "decided_by_id")
    )
    for k, r in enumerate(reviewers, start=1):
        out[("reviewer", r["decided_by_id"])] = f"reviewer-{k:02d}"
    return out


# ------------------------------------------------------------------------------------------
# Candidates (bulk form of candidates.selectors.candidates_with_identity)
# ------------------------------------------------------------------------------------------

CANDIDATE_COLUMNS = (
    "id",
    "item_id",
    "provider_id",
    "provider__name",
    "provider__kind",
    "model_name",
    "prompt_version",
    "fields",
    "removed",
    "think",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
)


def candidates_by_item(
    *, project: Project, chunk_size: int = 2000, items: tuple[int | None, int | None] = (None, None)
) -> Iterator[tuple[int, list[dict]]]:
    """(item id, candidates) in item order, streamed: for each item, the latest successful
    candidate of each provider, sorted by provider name then id. Same rule as
    ``candidates.selectors.candidates_with_identity`` (a test holds them equal), one query for
    the whole project instead of one per item. JSON is read as text and decoded (orjson) only
    for the candidates kept. ``items``: [low, high) item ids (None: no bound)."""
    low, high = items
    rows = Candidate.objects.filter(item__project=project, parse_error="")
    if low is not None:
        rows = rows.filter(item_id__gte=low)
    if high is not None:
        rows = rows.filter(item_id__lt=high)
    rows = (
        rows.order_by("item_id", "provider_id", "-created_at", "-id")
        .annotate(fields_text=Cast("fields", TextField()), removed_text=Cast("removed", TextField()))
        .values_list(*[_AS_TEXT.get(c, c) for c in CANDIDATE_COLUMNS])
    )
    current: int | None = None
    latest: dict[int, tuple] = {}
    for row in stream(rows, chunk_size):
        item_id = row[1]
        if item_id != current:
            if current is not None:
                yield current, _kept(latest)
            current, latest = item_id, {}
        latest.setdefault(row[2], row)
    if current is not None:
        yield current, _kept(latest)


_AS_TEXT = {"fields": "fields_text", "removed": "removed_text"}
_JSON_AT = [k for k, c in enumerate(CANDIDATE_COLUMNS) if c in _AS_TEXT]


def _kept(latest: dict[int, tuple]) -> list[dict]:
    out = []
    for row in latest.values():
        rec = dict(zip(CANDIDATE_COLUMNS, row))
        for k in _JSON_AT:
            text = row[k]
            rec[CANDIDATE_COLUMNS[k]] = json_loads(text) if text is not None else None
        out.append(rec)
    return sorted(out, key=lambda c: (c["provider__name"], c["id"]))


# ------------------------------------------------------------------------------------------
# Audit report (written by the quality app)
# ------------------------------------------------------------------------------------------


def audit_for_export(*, project: Project) -> dict:
    """audit.json's contents from ``quality.audits``. (A release's agreement.json is computed
    over its own items: exports.build.agreement; the project-wide report, which costs a full
    agreement computation when its cache is stale, is not read.)"""
    audit = audit_report_for_export(project=project)
    if audit is None:
        audit = {"status": "no audit", "reason": "no candidate-blind audit has been run on this project"}
    return audit
