"""Celery tasks of the workflow app: thin, idempotent (they take ids and call one service)."""

from __future__ import annotations

from celery import shared_task

from candidates.models import ConversionJob
from core.jobs import job_run

CONVERSION_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "soft_time_limit": 3 * 3600,
    "time_limit": 3 * 3600 + 300,
    "ignore_result": True,
}


@shared_task(name="workflow.run_conversions", **CONVERSION_OPTIONS)
def run_conversions_task(job_id: int) -> None:
    """Run a conversion job (workflow.services.conversion_job_work); a lost worker's job is
    taken over by the next delivery (core.jobs)."""
    from workflow.services import conversion_job_work  # tasks import services lazily (CONVENTIONS)

    job_run(ConversionJob, job_id, conversion_job_work)
