"""Celery tasks: the options reached Celery, the tasks are thin and idempotent."""

from __future__ import annotations

import pytest
from django.conf import settings

from exports.models import DedupScan, ExportJob, NearDuplicatePair, Release
from exports.tasks import export_job_task, near_duplicates_detect_task


def test_task_options_reached_celery():
    from concord.celery import app

    for name, _task in (
        ("exports.detect_near_duplicates", near_duplicates_detect_task),
        ("exports.build_release", export_job_task),
    ):
        registered = app.tasks[name]
        assert registered.acks_late is True and registered.reject_on_worker_lost is True
        assert registered.ignore_result is True
        # below the broker's visibility timeout: a running job is never delivered twice
        assert (
            registered.soft_time_limit
            < registered.time_limit
            < settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 7200)
        )
    assert export_job_task.max_retries == 0 and near_duplicates_detect_task.max_retries == 0


@pytest.mark.django_db
def test_tasks_run_once_and_ignore_redelivery(project, gold_items, lead):
    scan = DedupScan.objects.create(project=project, threshold=project.phash_threshold)
    assert near_duplicates_detect_task.delay(scan.pk).get() == 0  # the four test images are far apart
    assert near_duplicates_detect_task.delay(scan.pk).get() == 0  # redelivered: the scan is done, nothing happens
    assert near_duplicates_detect_task.delay(987654).get() == 0  # a deleted scan: nothing to do
    job = ExportJob.objects.create(project=project, created_by=lead)
    export_job_task.delay(job.pk)
    job.refresh_from_db()
    assert job.status == "done" and Release.objects.count() == 1
    export_job_task.delay(job.pk)  # redelivered after success: no second release
    export_job_task.delay(123456)  # unknown job
    assert Release.objects.count() == 1 and NearDuplicatePair.objects.count() == 0
