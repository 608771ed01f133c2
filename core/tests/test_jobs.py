"""The one job mechanism (core.jobs): claim, heartbeat, takeover, failure, cancel, sweeper.

Exercised on a real job model (projects.ImportJob) since core's Job is abstract.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core import jobs
from core.jobs import (
    JobCancelled,
    JobFailed,
    Progress,
    job_cancel,
    job_claim,
    job_finish,
    job_models,
    job_run,
    jobs_sweep,
)
from core.models import JobStatus, job_lease
from projects.models import ImportJob

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(project, lead):
    return ImportJob.objects.create(project=project, created_by=lead, source_name="x")


def test_every_job_kind_is_a_job_model_with_a_registered_task():
    from celery import current_app

    kinds = {m.kind: m for m in job_models()}
    assert {"import", "candidates", "agreement", "near-duplicates", "release"} <= set(kinds)
    for model in kinds.values():
        assert model.task_name in current_app.tasks, model


def test_claim_once_then_takeover_only_after_the_lease(job):
    assert job_claim(ImportJob, job.pk).status == JobStatus.RUNNING
    assert job_claim(ImportJob, job.pk) is None  # alive: a second delivery does not run it
    ImportJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - job_lease() - timedelta(seconds=1))
    taken = job_claim(ImportJob, job.pk)
    assert taken is not None and taken.taken_over_at is not None and taken.attempts == 2


def test_progress_renews_the_heartbeat_and_checkpoints_fields(job):
    claimed = job_claim(ImportJob, job.pk)
    old = timezone.now() - timedelta(minutes=30)
    ImportJob.objects.filter(pk=job.pk).update(heartbeat_at=old)
    progress = Progress(claimed)
    progress(5, 10, phase="importing", force=True, imported=3)
    row = ImportJob.objects.get(pk=job.pk)
    assert row.heartbeat_at > old and (row.progress_done, row.progress_total, row.imported) == (5, 10, 3)
    assert row.phase == "importing" and not row.stalled


def test_every_exception_ends_the_job_with_the_step_named(job):
    def work(j, progress):
        progress(phase="reading rows", force=True)
        raise KeyError("boom")

    ended = job_run(ImportJob, job.pk, work)
    assert ended.status == JobStatus.FAILED and "reading rows" in ended.error and "boom" in ended.error
    assert ended.finished_at is not None


@pytest.fixture
def cleaned(monkeypatch):
    """The kind's registered cleanup, recording which jobs it was called for."""
    calls: list[int] = []
    monkeypatch.setitem(jobs._CLEANUPS, ImportJob, lambda j: calls.append(j.pk))
    return calls


def test_job_failed_keeps_the_message_and_cleanup_runs(job, cleaned):
    def work(j, progress):
        raise JobFailed("no manifest found")

    ended = job_run(ImportJob, job.pk, work)
    assert (ended.status, ended.error, cleaned) == (JobStatus.FAILED, "no manifest found", [job.pk])


def test_finish_publishes_fields_atomically_and_only_once(job, cleaned):
    def work(j, progress):
        assert job_finish(j, imported=7)
        assert not job_finish(j, imported=9)  # already done

    ended = job_run(ImportJob, job.pk, work)
    assert (ended.status, ended.imported) == (JobStatus.DONE, 7)
    assert cleaned == []  # no cleanup after success


def test_cancelling_a_stalled_job_runs_its_cleanup(job, cleaned):
    job_claim(ImportJob, job.pk)
    ImportJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - job_lease() * 2)
    job.refresh_from_db()
    assert job_cancel(job).status == JobStatus.CANCELLED and cleaned == [job.pk]


def test_cancel_queued_running_and_stalled(job, project, lead):
    assert job_cancel(job).status == JobStatus.CANCELLED  # queued: at once
    running = ImportJob.objects.create(project=project, created_by=lead, source_name="y")
    claimed = job_claim(ImportJob, running.pk)
    assert job_cancel(claimed).cancel_requested is True
    with pytest.raises(JobCancelled):
        Progress(claimed)(1, 2, force=True)  # the running job stops at its next progress report
    stalled = ImportJob.objects.create(project=project, created_by=lead, source_name="z")
    job_claim(ImportJob, stalled.pk)
    ImportJob.objects.filter(pk=stalled.pk).update(heartbeat_at=timezone.now() - job_lease() * 2)
    stalled.refresh_from_db()
    assert stalled.stalled and job_cancel(stalled).status == JobStatus.CANCELLED


def test_a_cancelled_running_job_is_recorded_as_cancelled(job):
    def work(j, progress):
        ImportJob.objects.filter(pk=j.pk).update(cancel_requested=True)
        progress(1, 2, force=True)

    assert job_run(ImportJob, job.pk, work).status == JobStatus.CANCELLED


def test_sweeper_resends_lost_jobs_and_leaves_live_ones(project, lead, monkeypatch):
    sent = []
    monkeypatch.setattr("core.jobs.task_send", lambda name, *args, **kw: sent.append((name, args)))
    old = timezone.now() - job_lease() - timedelta(seconds=5)
    lost_running = ImportJob.objects.create(project=project, source_name="a", status="running", heartbeat_at=old)
    lost_pending = ImportJob.objects.create(project=project, source_name="b")
    ImportJob.objects.filter(pk=lost_pending.pk).update(created_at=old)
    alive = ImportJob.objects.create(project=project, source_name="c", status="running", heartbeat_at=timezone.now())
    fresh_pending = ImportJob.objects.create(project=project, source_name="d")
    done = ImportJob.objects.create(project=project, source_name="e", status="done", heartbeat_at=old)
    jobs_sweep()
    resent = {args[0] for name, args in sent if name == ImportJob.task_name}
    assert resent == {lost_running.pk, lost_pending.pk}
    assert not resent & {alive.pk, fresh_pending.pk, done.pk}


def test_generic_job_views_are_scoped_and_the_one_partial_polls(client_for, project, lead, annotator_a, outsider):
    job = ImportJob.objects.create(project=project, created_by=lead, source_name="zip.zip")
    url = f"/p/{project.slug}/jobs/import/{job.pk}/"
    page = client_for(lead).get(url)
    assert page.status_code == 200 and 'hx-trigger="every 1s"' in page.content.decode()
    assert client_for(annotator_a).get(url).status_code == 403
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(lead).get(f"/p/{project.slug}/jobs/nope/{job.pk}/").status_code == 404
    api = client_for(lead).get(f"/api/projects/{project.slug}/jobs/import/{job.pk}/").json()
    assert api["kind"] == "import" and api["status"] == "pending" and api["stalled"] is False
    cancelled = client_for(lead).post(f"/api/projects/{project.slug}/jobs/import/{job.pk}/cancel").json()
    assert cancelled["status"] == "cancelled"
    assert client_for(annotator_a).post(f"/api/projects/{project.slug}/jobs/import/{job.pk}/cancel").status_code == 403
