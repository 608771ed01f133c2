"""Candidate jobs: the tasks of a job, finishing it, retries, moving items to annotation."""

from __future__ import annotations

import logging
import re

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from candidates.models import Candidate, CandidateJob, CandidateTask, Provider
from candidates.prompts import prompt_for_project
from core.errors import Invalid
from core.jobs import job_enqueue
from core.models import ACTIVE, JobStatus
from projects.models import Item, Project, Stage

log = logging.getLogger(__name__)

PENDING_STATES = (CandidateTask.Status.PENDING, CandidateTask.Status.RUNNING)


# -- jobs --------------------------------------------------------------------------------------


def parse_item_ids(text: str) -> list[int]:
    """Item ids typed by a lead: numbers separated by commas, spaces or new lines."""
    ids, bad = [], []
    for token in re.split(r"[\s,;]+", text or ""):
        if not token:
            continue
        if token.isdigit() and len(token) < 19:
            ids.append(int(token))
        else:
            bad.append(token)
    if bad:
        shown = ", ".join(bad[:5]) + ("…" if len(bad) > 5 else "")
        message = f"Not item ids: {shown}. Give numbers separated by commas or spaces."
        raise Invalid(message, errors={"item_ids": message})
    return list(dict.fromkeys(ids))


def _items_for_job(*, project: Project, item_ids: list[int] | None) -> list[int]:
    if item_ids is None:
        return list(Item.objects.filter(project=project, stage=Stage.NEW).order_by("id").values_list("id", flat=True))
    ids = list(dict.fromkeys(int(i) for i in item_ids))
    found = set(Item.objects.filter(project=project, pk__in=ids).values_list("id", flat=True))
    missing = [i for i in ids if i not in found]
    if missing:
        shown = ", ".join(map(str, missing[:10])) + ("…" if len(missing) > 10 else "")
        message = f"No such item in this project: {shown}."
        raise Invalid(message, errors={"item_ids": message})
    return ids


def candidate_job_start(
    *, project: Project, user, item_ids: list[int] | None = None, enqueue: bool = True
) -> CandidateJob:
    """One task per (item, enabled provider); the job's own Celery task publishes them.

    ``item_ids=None`` means every item in stage ``new``. Pairs that already have a successful
    candidate for the current prompt version are recorded as done and not sent again.
    """
    providers = list(Provider.objects.filter(project=project, enabled=True).order_by("id"))
    if not providers:
        raise Invalid("No enabled provider: add or enable one on the providers page first.")
    ids = _items_for_job(project=project, item_ids=item_ids)
    if not ids:
        raise Invalid(
            "No item to generate candidates for: every item has left stage “new”. Select items by id to regenerate."
        )
    prompt = prompt_for_project(project)
    with transaction.atomic():
        job = CandidateJob.objects.create(
            project=project, created_by=user, prompt_version=prompt.version, progress_total=len(ids) * len(providers)
        )
        existing = set(
            Candidate.objects.filter(
                item_id__in=ids, provider__in=providers, prompt_version=prompt.version, parse_error=""
            ).values_list("item_id", "provider_id")
        )
        CandidateTask.objects.bulk_create(
            [
                CandidateTask(
                    job=job,
                    item_id=item_id,
                    provider=p,
                    status=CandidateTask.Status.DONE if (item_id, p.pk) in existing else CandidateTask.Status.PENDING,
                )
                for item_id in ids
                for p in providers
            ]
        )
        if enqueue:
            job_enqueue(job)
    candidate_job_finish_if_complete(job_id=job.pk)
    job.refresh_from_db()
    return job


def _job_heartbeat(job_id: int) -> None:
    """A task outcome: the job is alive (see CandidateJob)."""
    CandidateJob.objects.filter(pk=job_id, status__in=ACTIVE).update(heartbeat_at=timezone.now())


def candidate_job_retry_failed(*, job: CandidateJob, enqueue: bool = True) -> int:
    """Put the job's failed tasks back in the queue; returns how many."""
    with transaction.atomic():
        failed = list(CandidateTask.objects.select_for_update().filter(job=job, status=CandidateTask.Status.FAILED))
        if not failed:
            return 0
        # A reply without a JSON object or without any usable field was stored for inspection;
        # it must not block a new try (the unique constraint would).
        pairs = Q()
        for t in failed:
            pairs |= Q(item_id=t.item_id, provider_id=t.provider_id)
        unusable = [
            c.pk
            for c in Candidate.objects.filter(pairs).only("id", "parse_error", "fields")
            if c.parse_error or not c.fields
        ]
        Candidate.objects.filter(pk__in=unusable).delete()
        CandidateTask.objects.filter(pk__in=[t.pk for t in failed]).update(
            status=CandidateTask.Status.PENDING, attempts=0, error="", lease_until=None, updated_at=timezone.now()
        )
        CandidateJob.objects.filter(pk=job.pk).update(
            status=CandidateJob.Status.PENDING, finished_at=None, cancel_requested=False, error=""
        )
        if enqueue:
            job_enqueue(job)
    job.refresh_from_db()
    return len(failed)


def candidate_job_finish_if_complete(*, job_id: int) -> bool:
    """Mark the job done when no task is pending; its items then move to annotating.

    Call after the caller's own status change has committed: the last task to finish then
    sees every other task's final status (READ COMMITTED), and the conditional update lets
    exactly one caller finish the job.
    """
    S = CandidateTask.Status
    counts = CandidateTask.objects.filter(job_id=job_id).aggregate(
        open=Count("id", filter=Q(status__in=PENDING_STATES)),
        ended=Count("id", filter=Q(status__in=(S.DONE, S.FAILED, S.CANCELLED))),
    )
    now = timezone.now()
    CandidateJob.objects.filter(pk=job_id, status__in=ACTIVE).update(progress_done=counts["ended"], heartbeat_at=now)
    if counts["open"]:
        return False
    cancelled = CandidateJob.objects.filter(pk=job_id, cancel_requested=True).exists()
    finished = CandidateJob.objects.filter(pk=job_id, status__in=ACTIVE).update(
        status=JobStatus.CANCELLED if cancelled else JobStatus.DONE,
        finished_at=now,
        heartbeat_at=now,
    )
    if finished:
        Item.objects.filter(
            pk__in=CandidateTask.objects.filter(job_id=job_id).values("item_id"), stage=Stage.NEW
        ).update(stage=Stage.ANNOTATING)
    return bool(finished)


def item_advance_if_complete(*, item: Item) -> bool:
    """new -> annotating once the item has a usable candidate from every enabled provider."""
    enabled = set(Provider.objects.filter(project_id=item.project_id, enabled=True).values_list("id", flat=True))
    if not enabled:
        return False
    have = {
        provider_id
        for provider_id, fields in Candidate.objects.filter(
            item=item, provider_id__in=enabled, parse_error=""
        ).values_list("provider_id", "fields")
        if fields
    }
    if have != enabled:
        return False
    return bool(Item.objects.filter(pk=item.pk, stage=Stage.NEW).update(stage=Stage.ANNOTATING))


def items_start_annotation(*, project: Project, item_ids: list[int] | None = None) -> int:
    """Lead action "start annotation without candidates": new -> annotating. Returns the count."""
    qs = Item.objects.filter(project=project, stage=Stage.NEW)
    if item_ids is not None:
        _items_for_job(project=project, item_ids=item_ids)  # unknown ids are an error, not ignored
        qs = qs.filter(pk__in=item_ids)
    return qs.update(stage=Stage.ANNOTATING)
