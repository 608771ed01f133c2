"""Celery tasks of the projects app: thin, idempotent, one service call each."""

from __future__ import annotations

import socket

from celery import shared_task

from projects.imports import import_job_run
from projects.models import ImportJob
from projects.services import heartbeat_record

# acks_late + the job mechanism's heartbeat: a killed worker's import is taken over and resumes
# after its last checkpoint (rows are idempotent). The hard limit stays below the broker's
# visibility timeout so a running import is never delivered twice.
IMPORT_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "max_retries": 0,
    "soft_time_limit": 6600,
    "time_limit": 6900,
    "ignore_result": True,
}


@shared_task(name="projects.import_items", **IMPORT_OPTIONS)
def import_job_task(job_id: int) -> None:
    job = ImportJob.objects.filter(pk=job_id).first()
    if job is not None and not job.finished:
        import_job_run(job=job)


@shared_task(acks_late=True, max_retries=3, time_limit=30, soft_time_limit=25)
def heartbeat_task(token: str) -> None:
    heartbeat_record(token=token, hostname=socket.gethostname())
