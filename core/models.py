"""The job base model: every long-running thing (import, candidates, agreement reports,
near-duplicate scans, release builds, evaluations, OCR) is a row of a model derived from
``Job`` and is driven by ``core.jobs`` (claim, progress, heartbeat, fail, takeover).

Liveness is a heartbeat, not a start time: a running job renews ``heartbeat_at`` whenever it
reports progress (at least every few seconds). A RUNNING job whose heartbeat is older than the
lease (settings.CONCORD_JOB_LEASE_SECONDS) has lost its worker; the next delivery of its task,
or the periodic sweeper (core.jobs.jobs_sweep), takes it over.
"""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone


class JobStatus(models.TextChoices):
    PENDING = "pending", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


ACTIVE = (JobStatus.PENDING, JobStatus.RUNNING)
FINISHED = (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED)


def job_lease() -> timedelta:
    return timedelta(seconds=settings.CONCORD_JOB_LEASE_SECONDS)


class Job(models.Model):
    #: Name of the Celery task that runs a job of this kind with ``(job_id,)``.
    task_name: ClassVar[str]
    #: URL and REST name of the kind (``/p/<slug>/jobs/<kind>/<id>/``).
    kind: ClassVar[str]
    #: Template with the kind's own part of the progress partial (report, result), or None.
    detail_template: ClassVar[str | None] = None
    #: Project roles that may see the job's progress (leads may always cancel).
    readers: ClassVar[tuple[str, ...]] = ("lead",)

    Status = JobStatus

    status = models.CharField(max_length=12, choices=JobStatus.choices, default=JobStatus.PENDING, db_index=True)
    phase = models.CharField(max_length=80, blank=True, help_text="What the job is doing now.")
    progress_done = models.PositiveBigIntegerField(default=0)
    progress_total = models.PositiveBigIntegerField(default=0)
    error = models.TextField(blank=True, help_text="Why the job failed (the row or step is named).")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Renewed while a worker runs the job; stale = worker lost."
    )
    attempts = models.PositiveIntegerField(default=0, help_text="How many times a worker started the job.")
    taken_over_at = models.DateTimeField(
        null=True, blank=True, help_text="When a worker last took the job over from a lost one."
    )
    cancel_requested = models.BooleanField(default=False)

    class Meta:
        abstract = True

    @property
    def title(self) -> str:
        return f"{self._meta.verbose_name.capitalize()} #{self.pk}"

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def percent(self) -> int:
        if self.status == JobStatus.DONE:
            return 100
        if not self.progress_total:
            return 0
        return min(100, round(100 * self.progress_done / self.progress_total))

    @property
    def stalled(self) -> bool:
        """Running, but no heartbeat within the lease: its worker is gone (a takeover is due)."""
        if self.status != JobStatus.RUNNING:
            return False
        beat = self.heartbeat_at or self.started_at or self.created_at
        return beat is not None and timezone.now() - beat > job_lease()


class JobChunk(models.Model):
    """One slice of a job that fans out over workers (an import's rows, an OCR batch): any
    worker claims it (core.jobs.chunk_claim), it checkpoints and renews its own heartbeat, and
    a chunk whose heartbeat is older than the lease is claimed again by the next delivery.
    The concrete model adds the FK to its job (``job``) and what the chunk counts."""

    Status = JobStatus

    number = models.PositiveIntegerField(help_text="Position of the chunk in its job (0-based).")
    status = models.CharField(max_length=12, choices=JobStatus.choices, default=JobStatus.PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        abstract = True
