"""The one job mechanism: enqueue on commit, claim, progress with heartbeat, finish, fail,
cancel, takeover of a job whose worker was lost, and the periodic sweeper.

Lifecycle of a job row (a model derived from core.models.Job)::

    PENDING --claim--> RUNNING --finish--> DONE
                          |  \\--fail----> FAILED      (any exception, with the step named)
                          |   \\-cancel--> CANCELLED   (the lead asked; checked at each progress)
                          \\--heartbeat older than the lease--> taken over by the next claim

Delivery and liveness (README "Jobs"): tasks are ``acks_late`` and the broker redelivers an
unacknowledged message after its visibility timeout (hours, longer than any task's time
limit, so a running job is never delivered twice). Liveness is the heartbeat instead: a worker
killed mid-job stops renewing it, and within ``CONCORD_JOB_LEASE_SECONDS`` (+ one sweep
interval) the sweeper re-sends the job's task, whose claim takes the job over. The claim is
a conditional UPDATE, so of two deliveries only one runs the job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from celery import current_app
from django.apps import apps
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from core.models import ACTIVE, Job, JobChunk, JobStatus, job_lease

log = logging.getLogger(__name__)

J = TypeVar("J", bound=Job)

#: Progress writes are throttled to one per this many seconds (the last one always lands).
PROGRESS_INTERVAL = 0.5
MAX_ERROR = 4000


class JobCancelled(Exception):
    """Raised inside a running job when a lead cancelled it; the runner records it."""


class JobFailed(Exception):
    """A job that cannot go on, with a message fit for the lead (recorded verbatim)."""


def job_models() -> list[type[Job]]:
    return [m for m in apps.get_models() if issubclass(m, Job)]


#: Per kind: what an attempt that did not finish leaves behind (uploads, build folders), and
#: the sweeper's own repair of the kind (orphans of jobs whose worker died). Registered by the
#: app that owns the kind (its services module), so core never imports the apps above it.
_CLEANUPS: dict[type[Job], Callable[[Job], None]] = {}
_REPAIRS: dict[type[Job], Callable[[], int]] = {}


def job_cleanup_register(model: type[Job], cleanup: Callable[[Job], None]) -> None:
    _CLEANUPS[model] = cleanup


def job_repair_register(model: type[Job], repair: Callable[[], int]) -> None:
    _REPAIRS[model] = repair


def _cleanup(job: Job) -> None:
    cleanup = _CLEANUPS.get(type(job))
    if cleanup is None:
        return
    try:
        cleanup(job)
    except Exception:
        log.exception("cleanup of %s %s failed", job.kind, job.pk)


def task_send(task_name: str, *args, countdown: float | None = None, **kwargs) -> None:
    """Send a Celery task by name once the current transaction commits (now, outside one).

    By name, through the app's registry, so that services never import their tasks module
    (tasks import services; apps' ready() load the tasks). Eager mode (tests) runs it inline.
    """

    def send() -> None:
        current_app.tasks[task_name].apply_async(args=args, kwargs=kwargs or None, countdown=countdown)

    transaction.on_commit(send)


def job_enqueue(job: Job) -> None:
    task_send(job.task_name, job.pk)


def job_claim(model: type[J], job_id: int) -> J | None:
    """PENDING -> RUNNING, or take over a RUNNING job whose heartbeat is older than the lease.

    Returns the claimed row (fresh from the database) or None when the job is finished,
    missing, or alive in another worker. Expects no lock; the UPDATE is conditional.
    """
    now = timezone.now()
    fresh = model.objects.filter(pk=job_id, status=JobStatus.PENDING, cancel_requested=False).update(
        status=JobStatus.RUNNING,
        started_at=now,
        heartbeat_at=now,
        attempts=F("attempts") + 1,
    )
    if not fresh:
        stale = now - job_lease()
        fresh = (
            model.objects.filter(pk=job_id, status=JobStatus.RUNNING)
            .filter(Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True, started_at__lt=stale))
            .update(heartbeat_at=now, taken_over_at=now, attempts=F("attempts") + 1)
        )
        if fresh:
            log.warning("%s %s: heartbeat older than %s, taken over", model.kind, job_id, job_lease())
    if not fresh:
        return None
    return model.objects.get(pk=job_id)


class Progress:
    """Progress writer of one running job: ``progress(done, total, phase=...)``.

    Each write renews the heartbeat; writes are throttled (the job may call it per row).
    Raises JobCancelled when a lead asked to cancel. ``phase`` names the current step, which a
    failure message repeats.
    """

    def __init__(self, job: Job):
        self.job = job
        self.model = type(job)
        self.phase = job.phase
        self.done = job.progress_done
        self.total = job.progress_total
        self._last = 0.0
        self.fields: dict = {}

    def __call__(
        self,
        done: int | None = None,
        total: int | None = None,
        *,
        phase: str | None = None,
        force: bool = False,
        **fields,
    ) -> None:
        """``fields``: other columns of the job row checkpointed in the same UPDATE (counters
        a resumed job continues from)."""
        self.fields.update(fields)
        changed_phase = phase is not None and phase != self.phase
        if phase is not None:
            self.phase = phase[:80]
        if done is not None:
            self.done = int(done)
        if total is not None:
            self.total = int(total)
        now = time.monotonic()
        if not (force or changed_phase or now - self._last >= PROGRESS_INTERVAL):
            return
        self._last = now
        updated = self.model.objects.filter(pk=self.job.pk, status=JobStatus.RUNNING).update(
            phase=self.phase,
            progress_done=self.done,
            progress_total=self.total,
            heartbeat_at=timezone.now(),
            **self.fields,
        )
        if updated and self.model.objects.filter(pk=self.job.pk, cancel_requested=True).exists():
            raise JobCancelled(f"cancelled during {self.phase or 'the job'}")
        if not updated:
            # Finished or cancelled elsewhere (e.g. a lead cancelled a stalled job): stop here.
            raise JobCancelled("the job is no longer running")

    def heartbeat(self) -> None:
        self(force=True)


def job_finish(job: Job, **fields) -> bool:
    """RUNNING -> DONE with ``fields`` in the same UPDATE (atomic publication of a result)."""
    updated = (
        type(job)
        .objects.filter(pk=job.pk, status=JobStatus.RUNNING)
        .update(
            status=JobStatus.DONE,
            finished_at=timezone.now(),
            heartbeat_at=timezone.now(),
            progress_done=F("progress_total"),
            error="",
            **fields,
        )
    )
    return bool(updated)


def job_fail(job: Job, message: str) -> None:
    type(job).objects.filter(pk=job.pk, status__in=ACTIVE).update(
        status=JobStatus.FAILED,
        error=message[:MAX_ERROR],
        finished_at=timezone.now(),
    )


def job_cancel(job: Job) -> Job:
    """A lead's cancel: a queued or stalled job ends at once; a live one stops at its next
    progress report (the runner then records it as cancelled)."""
    model = type(job)
    now = timezone.now()
    model.objects.filter(pk=job.pk, status=JobStatus.PENDING).update(
        status=JobStatus.CANCELLED, finished_at=now, cancel_requested=True, error="cancelled before it started"
    )
    job.refresh_from_db()
    if job.status == JobStatus.RUNNING:
        if job.stalled:
            ended = model.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
                status=JobStatus.CANCELLED,
                finished_at=now,
                cancel_requested=True,
                error="cancelled while stalled (its worker was lost)",
            )
            if ended:
                _cleanup(job)
        else:
            model.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(cancel_requested=True)
        job.refresh_from_db()
    return job


def job_run(model: type[J], job_id: int, work: Callable[[J, Progress], None]) -> J | None:
    """Claim the job and run ``work(job, progress)``; every way out ends the job.

    ``work`` finishes the job itself (``job_finish``, with its result) when it succeeds. Any
    exception marks it failed with the step and the error; JobCancelled marks it cancelled.
    The kind's registered cleanup (job_cleanup_register) runs after an attempt that ended the
    job failed or cancelled (temporary files, build folders). Returns the row as it ended, or None when the job
    was not claimed.
    """
    job = job_claim(model, job_id)
    if job is None:
        return None
    progress = Progress(job)
    try:
        work(job, progress)
    except JobCancelled as exc:
        model.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
            status=JobStatus.CANCELLED, finished_at=timezone.now(), error=str(exc)[:MAX_ERROR]
        )
    except JobFailed as exc:
        job_fail(job, str(exc))
    except BaseException as exc:
        step = f" during {progress.phase}" if progress.phase else ""
        log.exception("%s %s failed%s", model.kind, job.pk, step)
        job_fail(job, f"{type(exc).__name__}{step}: {exc}")
        if not isinstance(exc, Exception):
            raise  # SystemExit / KeyboardInterrupt: recorded, then let the worker stop
    finally:
        job.refresh_from_db()
        # Only a job that ended: one the work handed on still running (its chunks or tasks
        # carry on in other workers) keeps its files.
        if job.status in (JobStatus.FAILED, JobStatus.CANCELLED):
            _cleanup(job)
    return job


C = TypeVar("C", bound=JobChunk)


def chunk_claim(model: type[C], chunk_id: int) -> C | None:
    """PENDING -> RUNNING, or take over a RUNNING chunk whose heartbeat is older than the
    lease; None when it ended, is missing or is alive elsewhere. A conditional UPDATE: of two
    deliveries of one chunk, one runs it."""
    now = timezone.now()
    stale = now - job_lease()
    claimed = (
        model.objects.filter(pk=chunk_id)
        .filter(
            Q(status=JobStatus.PENDING)
            | Q(status=JobStatus.RUNNING) & (Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True))
        )
        .update(status=JobStatus.RUNNING, started_at=now, heartbeat_at=now, attempts=F("attempts") + 1)
    )
    return model.objects.get(pk=chunk_id) if claimed else None


def chunk_run(model: type[C], chunk_id: int, work: Callable[[C], None]) -> C | None:
    """Claim a chunk (chunk_claim) and run ``work(chunk)`` on it: a JobCancelled from the work
    (a lead cancelled, or the chunk was taken over) ends it CANCELLED, any other error FAILED
    with the error, logged. None when the claim fails; else the chunk row, which the caller's
    job may now finish (its last open chunk ended)."""
    chunk = chunk_claim(model, chunk_id)
    if chunk is None:
        return None
    try:
        work(chunk)
    except JobCancelled:
        model.objects.filter(pk=chunk.pk, status=JobStatus.RUNNING).update(
            status=JobStatus.CANCELLED, finished_at=timezone.now()
        )
    except Exception as exc:
        log.exception("%s %s (job %s) failed", model.__name__, chunk.number, chunk.job_id)
        model.objects.filter(pk=chunk.pk, status=JobStatus.RUNNING).update(
            status=JobStatus.FAILED, finished_at=timezone.now(), error=f"{type(exc).__name__}: {exc}"[:MAX_ERROR]
        )
    return chunk


def chunks_to_send(queryset) -> list[int]:
    """Ids of the chunks (of one job) that need a delivery: queued, or running without a
    heartbeat within the lease (their worker was lost)."""
    stale = timezone.now() - job_lease()
    return list(
        queryset.filter(
            Q(status=JobStatus.PENDING)
            | Q(status=JobStatus.RUNNING) & (Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True))
        )
        .order_by("number")
        .values_list("pk", flat=True)
    )


def jobs_sweep(*, now=None) -> dict[str, int]:
    """Re-send the task of every job whose worker was lost, and of queued jobs whose message
    was lost; run each kind's own repair. Idempotent (claims are conditional); returns counts.

    A job stays stale until a worker claims it, so with no worker up each sweep sends its
    task again; the extra messages are no-ops (the claim fails) when a worker comes back.
    """
    now = now or timezone.now()
    stale = now - job_lease()
    counts: dict[str, int] = {}
    for model in job_models():
        lost = model.objects.filter(
            Q(status=JobStatus.RUNNING)
            & (Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True, started_at__lt=stale))
            | Q(status=JobStatus.PENDING, created_at__lt=stale, cancel_requested=False)
        ).values_list("pk", flat=True)
        ids = list(lost[:1000])
        for pk in ids:
            task_send(model.task_name, pk)
        repair = _REPAIRS.get(model)
        extra = repair() if repair is not None else 0
        if ids or extra:
            counts[model.kind] = len(ids) + extra
            log.info("sweeper: %s: %d job(s) re-sent, %d repaired", model.kind, len(ids), extra)
    return counts
