"""Celery tasks of the exports app: thin, idempotent, one service call each.

The options are asserted on the task objects in exports/tests/test_tasks.py, so a typo cannot
silently drop them.
"""
from __future__ import annotations

from celery import shared_task

DETECT_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "max_retries": 2,
    "default_retry_delay": 30,
    "soft_time_limit": 1700,
    "time_limit": 1800,
    "ignore_result": True,
}
# Below the Redis visibility timeout (3600 s) so a long build is not delivered twice, and below
# services.EXPORT_STALE_AFTER so a job abandoned by a killed worker can be taken over.
BUILD_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "max_retries": 0,
    "soft_time_limit": 3300,
    "time_limit": 3500,
    "ignore_result": True,
}


@shared_task(name="exports.detect_near_duplicates", bind=True, **DETECT_OPTIONS)
def near_duplicates_detect_task(self, project_id: int) -> int:
    """Scan a project for near-duplicate pairs (after an import, or when a lead asks).

    Idempotent: a redelivered or repeated scan adds only pairs that are not stored yet.
    """
    from exports.services import near_duplicates_detect
    from projects.models import Project

    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        return 0
    try:
        return near_duplicates_detect(project=project).pairs_new
    except Exception as exc:  # noqa: BLE001 - database hiccups: retry a bounded number of times
        if self.request.is_eager:
            raise
        raise self.retry(exc=exc) from exc


@shared_task(name="exports.build_release", **BUILD_OPTIONS)
def export_job_task(job_id: int) -> None:
    """Build and publish one export job. A job that is done, failed or running elsewhere is left alone."""
    from exports.models import ExportJob
    from exports.services import export_job_run

    job = ExportJob.objects.filter(pk=job_id).select_related("project", "created_by").first()
    if job is None or job.finished:
        return
    export_job_run(job=job)
