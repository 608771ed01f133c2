"""Read paths for candidates.

Blindness is enforced here (CONVENTIONS "Access"): what an annotator receives is built from
normalized schema fields only; provider, model, ids, timing, think and raw replies are never
loaded into an ``AnonymousCandidate``.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import Count, Q

from candidates.models import Candidate, CandidateJob, CandidateTask, Provider
from core.rows import alias_for, columns, fetch_rows, values_of
from projects.models import Item, Project


@dataclass(frozen=True)
class AnonymousCandidate:
    letter: str  # "A", "B", "C", ...
    fields: dict  # normalized schema fields only (no think, no provider, no ids)


@dataclass(frozen=True)
class IdentifiedCandidate:
    """A candidate with its identity: for leads, researchers and exports only."""

    id: int
    provider_id: int
    provider_name: str
    provider_kind: str
    model_name: str
    prompt_version: str
    fields: dict
    removed: list
    raw_reply: str
    think: str
    parse_error: str
    latency_ms: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    created_at: Any = field(compare=False)


def _latest_per_provider(*, item: Item) -> list[Candidate]:
    """Per provider, its newest candidate for ``item`` if that one is usable.

    Newest is by creation, which is the latest prompt version the provider answered: after a
    prompt change the new candidate replaces the old one as soon as it exists (and until then
    the item keeps its old candidates). If the newest reply held no JSON object or no valid
    field, the provider shows nothing rather than an answer to an older prompt.
    """
    latest: dict[int, Candidate] = {}
    rows = Candidate.objects.filter(item=item).select_related("provider").order_by("provider_id", "-created_at", "-id")
    for cand in rows:
        latest.setdefault(cand.provider_id, cand)
    return [c for c in latest.values() if not c.parse_error and c.fields]


def _order_key(*, item_pk: int, user_pk: int, candidate_pk: int) -> str:
    # SECRET_KEY in the hash: the order is stable for one (item, annotator) but not predictable
    # from ids, so annotators cannot infer which model is "A".
    return hashlib.sha256(f"{settings.SECRET_KEY}:{item_pk}:{user_pk}:{candidate_pk}".encode()).hexdigest()


def _letter(index: int) -> str:
    letters = string.ascii_uppercase
    if index < len(letters):
        return letters[index]
    return letters[index // len(letters) - 1] + letters[index % len(letters)]


_SHOWN = ("provider_id", "id", "parse_error", "fields")
#: Written out (core.rows): every workspace page and every save with a taken value reads it.
_LATEST_SQL = (
    f'SELECT {columns(Candidate, "c", _SHOWN)} FROM "{Candidate._meta.db_table}" c WHERE c."item_id" = %s'
    ' ORDER BY c."provider_id" ASC, c."created_at" DESC, c."id" DESC'
)


def _latest_for_annotator(*, item: Item) -> list[tuple[int, dict]]:
    """(id, fields) of what ``_latest_per_provider`` keeps, reading only the columns the
    anonymous view needs (no provider, model, reply or think is even loaded)."""
    latest: dict[int, tuple[int, str, dict]] = {}
    alias = alias_for(Candidate)
    rows = (values_of(Candidate, _SHOWN, row, alias=alias) for row in fetch_rows(alias, _LATEST_SQL, [item.pk]))
    for provider_id, pk, parse_error, fields in rows:
        latest.setdefault(provider_id, (pk, parse_error, fields))
    return [(pk, fields) for pk, parse_error, fields in latest.values() if not parse_error and fields]


def _shuffled(*, item: Item, user) -> list[tuple[str, int, dict]]:
    """(letter, candidate id, fields), in the annotator's order."""
    cands = _latest_for_annotator(item=item)
    cands.sort(key=lambda c: _order_key(item_pk=item.pk, user_pk=user.pk, candidate_pk=c[0]))
    return [(_letter(i), pk, fields) for i, (pk, fields) in enumerate(cands)]


def candidates_for_annotator(*, item: Item, user) -> list[AnonymousCandidate]:
    """The item's candidates as "Candidate A/B/C", shuffled per (item, annotator), stable.

    Only the latest successful candidate per provider is included; items without candidates
    give ``[]``. The returned objects hold nothing but a letter and normalized fields.
    """
    return [
        AnonymousCandidate(letter=letter, fields=dict(fields)) for letter, _, fields in _shuffled(item=item, user=user)
    ]


def candidate_ids_for_annotator(*, item: Item, user) -> dict[str, tuple[int, AnonymousCandidate]]:
    """Server side only: letter -> (stored candidate id, what the annotator saw), in one query
    (a save resolves its provenance letters with it)."""
    return {
        letter: (pk, AnonymousCandidate(letter=letter, fields=dict(fields)))
        for letter, pk, fields in _shuffled(item=item, user=user)
    }


def candidate_id_for_letter(*, item: Item, user, letter: str) -> int | None:
    """Server side only: which stored candidate ``letter`` was for this (item, annotator)."""
    shown = candidate_ids_for_annotator(item=item, user=user).get(letter)
    return shown[0] if shown else None


def _identified(cand: Candidate) -> IdentifiedCandidate:
    return IdentifiedCandidate(
        id=cand.pk,
        provider_id=cand.provider_id,
        provider_name=cand.provider.name,
        provider_kind=cand.provider.kind,
        model_name=cand.model_name,
        prompt_version=cand.prompt_version,
        fields=dict(cand.fields),
        removed=list(cand.removed),
        raw_reply=cand.raw_reply,
        think=cand.think,
        parse_error=cand.parse_error,
        latency_ms=cand.latency_ms,
        prompt_tokens=cand.prompt_tokens,
        completion_tokens=cand.completion_tokens,
        created_at=cand.created_at,
    )


def candidates_with_identity(*, item: Item) -> list[IdentifiedCandidate]:
    """Latest successful candidate per provider, with provider identity (leads/researchers/exports)."""
    cands = sorted(_latest_per_provider(item=item), key=lambda c: (c.provider.name, c.pk))
    return [_identified(c) for c in cands]


def candidate_history_with_identity(*, item: Item) -> list[IdentifiedCandidate]:
    """Every stored candidate of an item, failed parses and old prompt versions included."""
    rows = Candidate.objects.filter(item=item).select_related("provider").order_by("provider__name", "-created_at")
    return [_identified(c) for c in rows]


def providers_for_project(*, project: Project):
    return Provider.objects.filter(project=project).order_by("name", "id")


def jobs_for_project(*, project: Project):
    return (
        CandidateJob.objects.filter(project=project)
        .annotate(
            n_tasks=Count("tasks"),
            n_done=Count("tasks", filter=Q(tasks__status=CandidateTask.Status.DONE)),
            n_failed=Count("tasks", filter=Q(tasks__status=CandidateTask.Status.FAILED)),
        )
        .order_by("-created_at", "-id")
    )


@dataclass(frozen=True)
class ProviderProgress:
    provider_id: int
    provider_name: str
    total: int
    done: int
    failed: int
    pending: int
    running: int

    @property
    def finished(self) -> int:
        return self.done + self.failed

    @property
    def percent_done(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0

    @property
    def percent_failed(self) -> int:
        return round(100 * self.failed / self.total) if self.total else 0


@dataclass(frozen=True)
class JobProgress:
    job: CandidateJob
    providers: list[ProviderProgress]

    @property
    def total(self) -> int:
        return sum(p.total for p in self.providers)

    @property
    def done(self) -> int:
        return sum(p.done for p in self.providers)

    @property
    def failed(self) -> int:
        return sum(p.failed for p in self.providers)

    @property
    def pending(self) -> int:
        return sum(p.pending + p.running for p in self.providers)

    @property
    def finished(self) -> bool:
        return self.pending == 0


def job_progress(*, job: CandidateJob) -> JobProgress:
    """done / failed / pending per provider (CandidateJob.provider_progress: one query)."""
    return JobProgress(
        job=job,
        providers=[
            ProviderProgress(
                provider_id=r["provider_id"],
                provider_name=r["provider__name"],
                total=r["total"],
                done=r["done"],
                failed=r["failed"],
                pending=r["pending"],
                running=r["running"],
            )
            for r in job.provider_progress()
        ],
    )
