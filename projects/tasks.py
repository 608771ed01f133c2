from __future__ import annotations

import socket

from celery import shared_task

from projects.models import ImportJob


@shared_task(acks_late=True, max_retries=0, time_limit=3600, soft_time_limit=3500)
def import_job_task(job_id: int) -> None:
    # RUNNING too: a worker killed mid-import redelivers the task (acks_late) and the rerun only
    # adds the rows still missing.
    job = ImportJob.objects.filter(
        pk=job_id, status__in=[ImportJob.Status.PENDING, ImportJob.Status.RUNNING]
    ).first()
    if job is None:
        return  # already finished (redelivery) or deleted
    from exports.tasks import near_duplicates_detect_task
    from projects.services import import_job_run

    job = import_job_run(job=job)
    if job.imported:
        # New items join the near-duplicate review queue (and the release's split groups).
        near_duplicates_detect_task.delay(job.project_id)


@shared_task(acks_late=True, max_retries=3, time_limit=30, soft_time_limit=25)
def heartbeat_task(token: str) -> None:
    from projects.services import heartbeat_record

    heartbeat_record(token=token, hostname=socket.gethostname())
