"""Services of the exports app not covered by the release and API tests: the sweeper's repair."""

from __future__ import annotations

import pytest
from django.utils import timezone

from core.jobs import jobs_sweep
from exports.models import ExportJob
from exports.selectors import releases_root

pytestmark = pytest.mark.django_db


def test_sweeper_removes_build_folders_of_jobs_that_ended(project, lead):
    """A worker killed mid-build leaves .building/job-<id>-*; once the job ended (cancelled as
    stalled, failed), the sweeper removes it; an active job's folder is kept."""
    ended = ExportJob.objects.create(project=project, created_by=lead, status="cancelled")
    alive = ExportJob.objects.create(project=project, created_by=lead, status="running", heartbeat_at=timezone.now())
    building = releases_root() / ".building"
    for pk in (ended.pk, alive.pk, 999999):
        (building / f"job-{pk}-abc").mkdir(parents=True)
        (building / f"job-{pk}-abc" / "items.jsonl").write_text("partial")
    (building / "unrelated").mkdir()
    jobs_sweep()
    assert sorted(p.name for p in building.iterdir()) == sorted([f"job-{alive.pk}-abc", "unrelated"])


def test_a_stalled_build_does_not_block_the_next_and_its_folder_goes(project, gold_items, lead):
    """No worker alive (nothing will take the stalled build over): starting a build cancels it,
    removes what it left in .building and queues the new one; no 409."""
    from core.models import job_lease
    from exports.services import export_job_start

    stalled = ExportJob.objects.create(
        project=project, created_by=lead, status="running", heartbeat_at=timezone.now() - 2 * job_lease()
    )
    leftover = releases_root() / ".building" / f"job-{stalled.pk}-dead"
    leftover.mkdir(parents=True)
    new = export_job_start(project=project, user=lead, enqueue=False)
    stalled.refresh_from_db()
    assert (stalled.status, new.status) == ("cancelled", "pending")
    assert "stalled" in stalled.error and not leftover.exists()
