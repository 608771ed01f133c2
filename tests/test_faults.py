"""Jobs survive a killed worker: SIGKILL a real worker mid-import and mid-release-build, start a
new one, and the job ends done with nothing duplicated, lost, partial or left behind.

The broker keeps production's two-hour visibility timeout, so nothing is saved by redelivery:
the job's heartbeat goes stale (a 2 s lease here, 120 s in production), the sweeper in the new
worker's beat re-sends its task, and the claim takes it over (README "Jobs"). The candidate
jobs' version of this test is candidates/tests/test_worker.py.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from core.tests.workers import kill_hard, require_postgres_and_redis, start_worker, stop, wait_until

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

FAULT_ENV = {
    "CONCORD_TEST_VISIBILITY_TIMEOUT": "7200",
    "CONCORD_JOB_LEASE_SECONDS": "2",
    "CONCORD_JOB_SWEEP_SECONDS": "1",
}


@pytest.fixture
def broker():
    """Our own Redis database, emptied; tasks go to the worker processes, not inline."""
    require_postgres_and_redis()
    import redis

    from concord.celery import app

    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    app.conf.task_always_eager = False
    yield
    app.conf.task_always_eager = True


@pytest.fixture
def workers(tmp_path):
    """Start workers by name; every one still alive at the end is stopped."""
    log = tmp_path / "worker.log"
    started = []

    def start(name: str, *, slow: float = 0.0, beat: bool = True):
        env = {**FAULT_ENV, "CONCORD_TEST_ROW_DELAY": str(slow)}
        proc = start_worker(
            log=log, name=name, concurrency=2, beat_schedule=tmp_path / f"beat-{name}" if beat else None, env=env
        )
        started.append(proc)
        return proc

    start.log = log
    yield start
    for proc in started:
        stop(proc)


def _zip_upload(folder: Path, n: int) -> SimpleUploadedFile:
    from projects.factories import image_bytes, source_write

    rows = [{"image": f"img{i}.jpg", "text": f"Meme {i} about Planet Zorg", "source_id": f"s{i}"} for i in range(n)]
    source = source_write(folder, rows, {f"img{i}.jpg": image_bytes(i) for i in range(n)})
    archive = folder.parent / "upload.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted(source.iterdir()):
            z.write(path, path.name)
    return SimpleUploadedFile("upload.zip", archive.read_bytes(), content_type="application/zip")


def test_import_killed_mid_way_is_taken_over_and_resumes(broker, workers, project, lead, tmp_path):
    from projects.imports import import_job_start
    from projects.models import ImportJob, Item

    n = 60
    first = workers("first", slow=0.1, beat=False)  # ~6 s of rows: the kill lands mid-way
    job = import_job_start(project=project, user=lead, uploaded_file=_zip_upload(tmp_path / "src", n))
    upload = Path(ImportJob.objects.get(pk=job.pk).upload_path)
    wait_until(
        lambda: ImportJob.objects.filter(pk=job.pk, progress_done__gte=10).exists(),
        timeout=60,
        what="the import to pass row 10",
        log=workers.log,
    )
    kill_hard(first)
    at_kill = ImportJob.objects.get(pk=job.pk)
    assert at_kill.status == "running" and at_kill.progress_done < n, "the import ended before the kill"

    workers("second")
    wait_until(
        lambda: ImportJob.objects.filter(pk=job.pk, status__in=["done", "failed"]).exists(),
        timeout=60,
        what="the import to be taken over and end",
        log=workers.log,
    )
    ended = ImportJob.objects.get(pk=job.pk)
    assert ended.status == "done", ended.error
    assert ended.taken_over_at is not None and ended.attempts == 2
    assert ended.progress_done >= at_kill.progress_done  # resumed, not restarted from row 0
    ids = list(Item.objects.filter(project=project).values_list("source_id", flat=True))
    assert sorted(ids) == sorted(f"s{i}" for i in range(n))  # 0 lost, 0 duplicated
    assert (ended.imported, ended.already_present, ended.errors) == (n, 0, [])  # counts exact across the kill
    assert not upload.exists()  # the temporary upload is gone


def test_ocr_run_fans_out_in_chunks_and_a_killed_worker_s_chunks_are_taken_over(
    broker, workers, project, lead, tmp_path
):
    """OCR goes out as chunk tasks (two run side by side in a worker of concurrency 2); SIGKILL
    mid-way, a second worker's sweeper takes the job over and re-sends the lost chunks, and every
    item ends with exactly one result and one text-free variant, the counts exact."""
    from concord.celery import app
    from projects.factories import items_create
    from projects.models import ItemOcr, ItemVariant, OcrChunk, OcrJob
    from projects.ocr import CHUNK_ITEMS, ocr_job_start

    app.conf.task_always_eager = True  # the items are imported inline, without OCR
    items = items_create(project, tmp_path / "src", CHUNK_ITEMS + 10)
    app.conf.task_always_eager = False
    n = len(items)
    first = workers("first", slow=0.15, beat=False)
    job = ocr_job_start(project=project, user=lead)
    wait_until(
        lambda: (
            OcrChunk.objects.filter(job_id=job.pk, status="running").count() == 2
            and OcrJob.objects.filter(pk=job.pk, progress_done__gte=6).exists()
        ),
        timeout=90,
        what="both OCR chunks to run and 6 items to be read",
        log=workers.log,
    )
    kill_hard(first)
    at_kill = OcrJob.objects.get(pk=job.pk)
    assert at_kill.status == "running" and at_kill.progress_done < n, "the OCR run ended before the kill"
    assert at_kill.progress_total == n and OcrChunk.objects.filter(job_id=job.pk).count() == 2

    workers("second")
    wait_until(
        lambda: OcrJob.objects.filter(pk=job.pk, status__in=["done", "failed"]).exists(),
        timeout=120,
        what="the OCR run to be taken over and end",
        log=workers.log,
    )
    ended = OcrJob.objects.get(pk=job.pk)
    assert ended.status == "done", ended.error
    assert ended.taken_over_at is not None and ended.attempts == 2
    chunks = list(OcrChunk.objects.filter(job_id=job.pk).order_by("number"))
    assert [c.status for c in chunks] == ["done", "done"] and all(c.attempts == 2 for c in chunks)
    assert sorted(pk for c in chunks for pk in c.item_ids) == [it.pk for it in items]
    assert ItemOcr.objects.filter(item__project=project).count() == n  # one each (one-to-one)
    variants = Counter(ItemVariant.objects.filter(item__project=project).values_list("item_id", flat=True))
    assert set(variants.values()) <= {1} and len(variants) + ended.unreadable == n
    assert (ended.items_read, ended.progress_done, ended.progress_total) == (n, n, n)


def test_release_build_killed_mid_way_restarts_cleanly_and_the_next_build_is_not_blocked(
    broker, workers, project, lead, items, annotator_a, annotator_b
):
    from exports.factories import gold_create
    from exports.models import ExportJob, Release
    from exports.selectors import release_dir, releases_root
    from exports.services import export_job_start

    gold_create(project, items, [annotator_a, annotator_b])
    building = releases_root() / ".building"
    first = workers("first", slow=0.4, beat=False)  # ~0.4 s per progress call of the build
    job = export_job_start(project=project, user=lead)
    wait_until(
        lambda: (
            ExportJob.objects.filter(pk=job.pk, phase__in=["records", "annotations", "candidates"]).exists()
            and any(building.glob(f"job-{job.pk}-*"))
        ),
        timeout=60,
        what="the build to start writing",
        log=workers.log,
    )
    kill_hard(first)
    assert ExportJob.objects.get(pk=job.pk).status == "running"
    assert any(building.glob(f"job-{job.pk}-*"))  # what a killed build leaves behind
    assert not Release.objects.filter(project=project).exists()

    workers("second")
    wait_until(
        lambda: ExportJob.objects.filter(pk=job.pk, status__in=["done", "failed", "cancelled"]).exists(),
        timeout=60,
        what="the build to be taken over and end",
        log=workers.log,
    )
    ended = ExportJob.objects.get(pk=job.pk)
    assert ended.status == "done", ended.error
    assert ended.taken_over_at is not None
    release = Release.objects.get(project=project)  # exactly one, complete
    assert release.record_count == len(items)
    for name, meta in release.manifest["files"].items():
        data = (release_dir(release) / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == meta["sha256"], name
    assert not any(building.glob("job-*"))  # no leftover folder

    again = export_job_start(project=project, user=lead)  # no 409: the project is not blocked
    wait_until(
        lambda: ExportJob.objects.filter(pk=again.pk, status="done").exists(),
        timeout=60,
        what="the next build",
        log=workers.log,
    )
    assert Counter(Release.objects.filter(project=project).values_list("number", flat=True)) == {1: 1, 2: 1}
