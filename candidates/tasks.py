"""Celery tasks: thin, idempotent, one per (item, provider).

The options below are asserted in tests (candidates/tests/test_tasks.py) on the task object,
so a typo cannot silently drop them.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time

from celery import current_app, shared_task
from celery.signals import worker_init
from django.utils import timezone

from candidates.models import CandidateJob, CandidateTask, Provider, ProviderKind
from candidates.ratelimit import DEFAULT_HORIZON, rate_limit_reserve_many
from candidates.services import (
    SLOT_LEAD,
    Outcome,
    candidate_job_finish_if_complete,
    candidate_task_execute,
    candidate_task_fail,
    candidate_task_release,
)
from core.jobs import Progress, job_run

log = logging.getLogger(__name__)

MAX_RETRIES = 6
BACKOFF_BASE = 5.0  # seconds: 5, 10, 20, 40, 80, 160 (x 0.5-1.0 jitter), about 5 minutes in all
BACKOFF_CAP = 300.0
# Far below the Redis broker's visibility timeout (3600 s in settings): a message waiting longer
# than that would be delivered a second time.
RETRY_AFTER_CAP = 1800.0

TASK_OPTIONS = {
    "bind": True,
    "acks_late": True,  # a worker killed mid-call leaves the message to be redelivered
    "reject_on_worker_lost": True,
    "max_retries": MAX_RETRIES,
    # Provider timeouts are capped at 300 s (services.MAX_TIMEOUT_SECONDS).
    "soft_time_limit": 360,
    "time_limit": 420,
    "ignore_result": True,
}


def backoff_delay(*, retries: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
    """Exponential backoff with jitter; never earlier than the server's Retry-After."""
    rng = rng or random
    exp = min(BACKOFF_CAP, BACKOFF_BASE * (2 ** max(0, retries)))
    delay = exp * rng.uniform(0.5, 1.0)
    if retry_after is not None:
        delay = max(delay, min(retry_after, RETRY_AFTER_CAP) + rng.uniform(0, 1.0))
    return delay


@worker_init.connect
def _preload_sdks(**kwargs) -> None:
    """Import the SDKs in the worker's main process, before the pool forks: otherwise every pool
    process imports them (~1.5 s of CPU each) on its first call, late for its rate-limit slot."""
    import google.genai  # noqa: F401
    import openai  # noqa: F401
    from google.genai import types  # noqa: F401


@shared_task(name="candidates.generate_candidate", **TASK_OPTIONS)
def candidate_task_run(self, task_id: int, slot_at: float | None = None) -> str:
    eager = bool(self.request.is_eager)
    retries = self.request.retries or 0
    while True:
        try:
            outcome = candidate_task_execute(task_id=task_id, slot_at=slot_at)
        except Exception as exc:  # a bug or a database outage: never leave the row "running"
            log.exception("candidate task %s crashed", task_id)

            with contextlib.suppress(Exception):
                candidate_task_release(task_id=task_id, error=f"internal error: {type(exc).__name__}: {exc}")
            outcome = Outcome("retry", error=f"internal error: {type(exc).__name__}: {exc}")
        slot_at = None
        if outcome.kind == "wait":
            if not eager:
                # Waiting for a rate-limit slot is not a failure: re-schedule without spending a
                # retry, and free this worker for other providers' tasks meanwhile.
                self.apply_async(
                    args=(task_id,),
                    kwargs={"slot_at": outcome.slot_at},
                    countdown=outcome.wait,
                    retries=retries,
                )
                return "rescheduled"
            time.sleep(outcome.wait)  # eager (tests, inline runs): no queue to go back to
            slot_at = outcome.slot_at
            continue
        if outcome.kind == "retry":
            if retries >= self.max_retries:
                candidate_task_fail(task_id=task_id, error=f"gave up after {retries + 1} attempts: {outcome.error}")
                return "failed"
            if not eager:
                raise self.retry(countdown=backoff_delay(retries=retries, retry_after=outcome.retry_after))
            # Eager: like Celery's own eager retry, run again at once (with eager_propagates,
            # self.retry would raise out of the caller instead).
            retries += 1
            continue
        return outcome.kind


PUBLISH_CHUNK = 2000


@shared_task(
    name="candidates.run_job",
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=0,
    soft_time_limit=570,
    time_limit=600,
    ignore_result=True,
)
def candidate_job_task(job_id: int) -> str:
    """The candidate job's own task (core.jobs): publish its unfinished tasks; also what the
    sweeper re-sends when the job's tasks went silent (see CandidateJob)."""
    job = job_run(CandidateJob, job_id, _publish_job)
    return job.status if job is not None else "not claimed"


def _publish_job(job: CandidateJob, progress: Progress) -> None:
    """Running tasks whose lease expired go back to pending (their worker was lost), then every
    pending task is published. Duplicates of a task already queued are harmless (status guard,
    lease, unique constraint) and only cost rate-limit slots."""
    now = timezone.now()
    CandidateTask.objects.filter(job=job, status=CandidateTask.Status.RUNNING, lease_until__lt=now).update(
        status=CandidateTask.Status.PENDING, lease_until=None, updated_at=now
    )
    ids = list(
        CandidateTask.objects.filter(job=job, status=CandidateTask.Status.PENDING)
        .order_by("id")
        .values_list("id", flat=True)
    )
    progress(phase="publishing tasks", force=True)
    for start in range(0, len(ids), PUBLISH_CHUNK):
        candidate_tasks_publish_ids(task_ids=ids[start : start + PUBLISH_CHUNK])
        progress(phase="publishing tasks")
    progress(phase="calling providers", force=True)
    candidate_job_finish_if_complete(job_id=job.pk)


def candidate_tasks_publish_ids(*, task_ids: list[int]) -> int:
    """Publish the given tasks that are still pending; returns how many."""
    tasks = list(CandidateTask.objects.filter(pk__in=task_ids, status=CandidateTask.Status.PENDING).order_by("id"))
    providers = list(Provider.objects.filter(pk__in={t.provider_id for t in tasks}).order_by("id"))
    candidate_tasks_publish(tasks=tasks, providers=providers)
    return len(tasks)


def candidate_tasks_publish(*, tasks: list[CandidateTask], providers: list[Provider]) -> None:
    """Send the tasks' messages, each timed for its own rate-limit slot (call after commit).

    Publishing everything at once would put hundreds of first attempts in the queue in front of
    the re-scheduled messages whose slots are due, and those slots would pass unused. Instead
    the slots within the horizon are reserved here in one step per provider and each message is
    published for its slot; the rest come back when their turn is roughly half a horizon away.
    """
    by_provider: dict[int, list[CandidateTask]] = {}
    for t in tasks:
        by_provider.setdefault(t.provider_id, []).append(t)
    with current_app.producer_or_acquire() as producer:  # one connection for the whole batch
        for provider in providers:
            group = by_provider.get(provider.pk, [])
            if not group:
                continue
            if provider.kind == ProviderKind.REPLAY:
                for t in group:
                    candidate_task_run.apply_async(args=(t.pk,), producer=producer)
                continue
            batch = rate_limit_reserve_many(provider=provider, count=len(group), horizon=DEFAULT_HORIZON)
            now, interval = time.time(), 60.0 / provider.requests_per_minute
            for i, t in enumerate(group):
                if i < len(batch.waits):
                    candidate_task_run.apply_async(
                        args=(t.pk,),
                        kwargs={"slot_at": now + batch.waits[i]},
                        countdown=max(0.0, batch.waits[i] - SLOT_LEAD),
                        producer=producer,
                    )
                else:
                    turn = batch.backlog + (i - len(batch.waits)) * interval
                    countdown = max(0.0, turn - DEFAULT_HORIZON / 2) + random.uniform(0, DEFAULT_HORIZON / 8)
                    candidate_task_run.apply_async(args=(t.pk,), countdown=countdown, producer=producer)
