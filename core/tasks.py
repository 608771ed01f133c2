"""The periodic sweeper of the job mechanism (Celery beat, every CONCORD_JOB_SWEEP_SECONDS)."""

from __future__ import annotations

from celery import shared_task

from core.jobs import jobs_sweep


@shared_task(name="core.sweep_jobs", acks_late=True, ignore_result=True, soft_time_limit=50, time_limit=60)
def sweep_jobs_task() -> dict[str, int]:
    return jobs_sweep()
