"""Celery tasks of the exports app: thin, idempotent, one service call each.

The options are asserted on the task objects in exports/tests/test_tasks.py, so a typo cannot
silently drop them. Liveness is the job mechanism's heartbeat (core.jobs), so the hard time
limits only need to stay below the broker's visibility timeout (settings).
"""

from __future__ import annotations

from celery import shared_task

from exports.models import ExportJob
from exports.services import export_job_run, hub_push_run, near_duplicates_scan_run

DETECT_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "max_retries": 0,
    "soft_time_limit": 1700,
    "time_limit": 1800,
    "ignore_result": True,
}
BUILD_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "max_retries": 0,
    "soft_time_limit": 6600,
    "time_limit": 6900,
    "ignore_result": True,
}


@shared_task(name="exports.detect_near_duplicates", **DETECT_OPTIONS)
def near_duplicates_detect_task(scan_id: int) -> int:
    """Run one queued near-duplicate scan; a finished or running one is left alone."""
    scan = near_duplicates_scan_run(scan_id=scan_id)
    return scan.pairs_new if scan is not None else 0


@shared_task(name="exports.build_release", **BUILD_OPTIONS)
def export_job_task(job_id: int) -> None:
    """Build and publish one export job. A job that is done, failed or alive elsewhere is left alone."""
    job = ExportJob.objects.filter(pk=job_id).select_related("project", "created_by").first()
    if job is not None and not job.finished:
        export_job_run(job=job)


PUSH_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "max_retries": 0,
    "soft_time_limit": 6600,
    "time_limit": 6900,
    "ignore_result": True,
}


@shared_task(name="exports.push_to_hub", **PUSH_OPTIONS)
def hub_push_task(push_id: int) -> None:
    """Push one release to the Hub (exports.services.hub_push_run); a finished push is left alone."""
    hub_push_run(push_id=push_id)
