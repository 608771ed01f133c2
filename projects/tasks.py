"""Celery tasks of the projects app: thin, idempotent, one service call each."""

from __future__ import annotations

import socket

from celery import shared_task

from projects.imports import import_chunk_run, import_job_run
from projects.models import ImportJob
from projects.ocr import ocr_chunk_run, ocr_job_run
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


CHUNK_OPTIONS = {**IMPORT_OPTIONS, "soft_time_limit": 1700, "time_limit": 1800}


@shared_task(name="projects.import_items", **IMPORT_OPTIONS)
def import_job_task(job_id: int) -> None:
    """Read the manifest into chunks and send one task per chunk (any worker takes them)."""
    job = ImportJob.objects.filter(pk=job_id).first()
    if job is not None and not job.finished:
        import_job_run(job=job, fan_out=True)


@shared_task(name="projects.import_chunk", **CHUNK_OPTIONS)
def import_chunk_task(chunk_id: int) -> None:
    import_chunk_run(chunk_id=chunk_id)


@shared_task(name="projects.ocr_items", **IMPORT_OPTIONS)
def ocr_job_task(job_id: int) -> None:
    """Split the items of one OCR job into chunks and send one task per chunk (a taken-over
    job re-sends the chunks whose worker was lost)."""
    ocr_job_run(job_id=job_id, fan_out=True)


@shared_task(name="projects.ocr_chunk", **CHUNK_OPTIONS)
def ocr_chunk_task(chunk_id: int) -> None:
    ocr_chunk_run(chunk_id=chunk_id)


@shared_task(acks_late=True, max_retries=3, time_limit=30, soft_time_limit=25)
def heartbeat_task(token: str) -> None:
    heartbeat_record(token=token, hostname=socket.gethostname())
