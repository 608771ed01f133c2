"""Write paths of the exports app: near-duplicate detection and review, export jobs, releases,
API tokens."""
from __future__ import annotations

import logging
import os
import shutil
import uuid
from datetime import timedelta

import numpy as np
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from exports.dedup import near_duplicate_pairs, phash_int
from exports.models import DedupScan, ExportJob, NearDuplicatePair, PairStatus, Release
from exports.selectors import releases_root, split_plan
from projects.models import Item, Project

log = logging.getLogger(__name__)

PAIR_BATCH = 5000
# A RUNNING job older than this was abandoned by a killed worker (the task's hard time limit is
# shorter), so a redelivered task may take it over.
EXPORT_STALE_AFTER = timedelta(hours=2)


class ExportBusy(Exception):
    """A build of this project is pending or running already (HTTP 409)."""


class StaleReview(Exception):
    """The pair was judged by someone else meanwhile: answer 409 and show the current state."""


# ------------------------------------------------------------------------------------------
# Near-duplicate detection
# ------------------------------------------------------------------------------------------

def near_duplicates_detect(*, project: Project, chunk_size: int = 10_000) -> DedupScan:
    """Store every pair of the project's items within ``project.phash_threshold`` (exact search,
    exports.dedup.near_duplicate_pairs) as an unreviewed NearDuplicatePair.

    Idempotent: existing pairs, reviewed or not, are left alone (the unique constraint on
    (item_a, item_b) makes a concurrent or repeated scan add only the new ones). Items that are
    exact pixel duplicates of an earlier item are skipped (the exact rule handles them; their
    links to the original join them to its group when splitting), as are pairs of items with
    the same decoded pixels.
    """
    scan = DedupScan.objects.create(project=project, threshold=project.phash_threshold)
    try:
        # Every item up to here is covered (exact copies through their original); later ones are not.
        max_item_id = Item.objects.filter(project=project).aggregate(n=Max("id"))["n"] or 0
        ids: list[int] = []
        hashes: list[int] = []
        pixel: list[int] = []
        rows = (
            Item.objects.filter(project=project, duplicate_of__isnull=True, pk__lte=max_item_id)
            .order_by("id").values_list("id", "phash", "pixel_hash")
        )
        for item_id, phash, pixel_hash in rows.iterator(chunk_size=chunk_size):
            ids.append(item_id)
            hashes.append(phash_int(phash))
            pixel.append(int(pixel_hash[:16], 16))
        id_arr = np.asarray(ids, dtype=np.int64)
        h = np.asarray(hashes, dtype=np.uint64)
        px = np.asarray(pixel, dtype=np.uint64)
        del ids, hashes, pixel
        pairs = near_duplicate_pairs(h, project.phash_threshold)
        i, j = pairs[:, 0], pairs[:, 1]
        keep = px[i] != px[j]
        i, j = i[keep], j[keep]
        distance = np.bitwise_count(h[i] ^ h[j])
        before = NearDuplicatePair.objects.filter(project=project).count()
        a_ids, b_ids, dists = id_arr[i].tolist(), id_arr[j].tolist(), distance.tolist()
        for start in range(0, len(a_ids), PAIR_BATCH):
            NearDuplicatePair.objects.bulk_create(
                [NearDuplicatePair(project=project, item_a_id=a, item_b_id=b, distance=d)
                 for a, b, d in zip(a_ids[start:start + PAIR_BATCH], b_ids[start:start + PAIR_BATCH],
                                    dists[start:start + PAIR_BATCH])],
                ignore_conflicts=True,
            )
        after = NearDuplicatePair.objects.filter(project=project).count()
        DedupScan.objects.filter(pk=scan.pk).update(
            status=DedupScan.Status.DONE, items_scanned=len(id_arr), max_item_id=max_item_id,
            pairs_found=len(a_ids), pairs_new=after - before, finished_at=timezone.now(),
        )
    except Exception as exc:
        DedupScan.objects.filter(pk=scan.pk).update(status=DedupScan.Status.FAILED, error=str(exc)[:2000],
                                                    finished_at=timezone.now())
        raise
    scan.refresh_from_db()
    return scan


def near_duplicate_pair_review(
    *, pair: NearDuplicatePair, reviewer, decision: str, expected_status: str
) -> NearDuplicatePair:
    """Judge a candidate pair "same" meme or "different" (a template with another text is different).

    ``expected_status`` is the status the reviewer saw: the write is a conditional UPDATE on it,
    so two people judging the same pair at once cannot silently overwrite each other (the second
    gets StaleReview -> HTTP 409). Judging again later (a correction) is allowed.
    """
    from adjudication.services import history_record

    if decision not in (PairStatus.SAME, PairStatus.DIFFERENT):
        raise ValidationError({"decision": "must be 'same' or 'different'"})
    if expected_status not in PairStatus.values:
        raise ValidationError({"expected_status": f"must be one of {', '.join(PairStatus.values)}"})
    now = timezone.now()
    with transaction.atomic():
        updated = NearDuplicatePair.objects.filter(pk=pair.pk, status=expected_status).update(
            status=decision, reviewed_by=reviewer, reviewed_at=now
        )
        if not updated:
            raise StaleReview("Someone judged this pair meanwhile; its current state is shown. Judge again if you disagree.")
        history_record(project=pair.project, item=pair.item_a, kind="near_duplicate_review", actor=reviewer,
                       old={"pair": [pair.item_a_id, pair.item_b_id], "status": expected_status},
                       new={"pair": [pair.item_a_id, pair.item_b_id], "status": decision})
    pair.status, pair.reviewed_by, pair.reviewed_at = decision, reviewer, now
    return pair


# ------------------------------------------------------------------------------------------
# Export jobs and releases
# ------------------------------------------------------------------------------------------

def export_job_start(*, project: Project, user, enqueue: bool = True) -> ExportJob:
    """Create a build job and enqueue it once committed.

    Raises ValidationError when there is no gold to release, ExportBusy when a build of the
    project is pending or running (a partial unique constraint: one active job per project).
    """
    from exports.selectors import released_gold_queryset

    if not released_gold_queryset(project=project).exists():
        raise ValidationError("There is no gold record to release yet.")
    try:
        with transaction.atomic():
            job = ExportJob.objects.create(project=project, created_by=user, phase="queued")
            if enqueue:
                from exports.tasks import export_job_task

                transaction.on_commit(lambda: export_job_task.delay(job.pk))
    except IntegrityError:
        raise ExportBusy("A release of this project is already being built; wait for it to finish.") from None
    return job


def _claim(job: ExportJob) -> bool:
    """PENDING -> RUNNING, or take over a RUNNING job abandoned by a killed worker."""
    now = timezone.now()
    claimed = ExportJob.objects.filter(pk=job.pk, status=ExportJob.Status.PENDING).update(
        status=ExportJob.Status.RUNNING, started_at=now, phase="starting")
    if not claimed:
        claimed = ExportJob.objects.filter(
            pk=job.pk, status=ExportJob.Status.RUNNING, started_at__lt=now - EXPORT_STALE_AFTER
        ).update(started_at=now, phase="restarting", progress_done=0)
    return bool(claimed)


def _progress_writer(job: ExportJob):
    def progress(phase: str, done: int, total: int) -> None:
        ExportJob.objects.filter(pk=job.pk).update(phase=phase, progress_done=done, progress_total=total)
    return progress


def export_job_run(*, job: ExportJob) -> Release | None:
    """Build the release into a temporary folder, then publish it atomically.

    Publishing = one transaction that numbers the release under a lock on the project row,
    creates the Release row, marks the job done and moves the folder into place with
    ``os.replace`` (atomic on one filesystem). Any failure before the commit removes the
    folder: a failed job leaves no files and no Release row, only the job's error message.
    """
    from exports.build import release_build

    if not _claim(job):
        return None
    project = job.project
    building = releases_root() / ".building"
    building.mkdir(parents=True, exist_ok=True)
    for leftover in building.glob(f"job-{job.pk}-*"):
        shutil.rmtree(leftover, ignore_errors=True)  # from a worker killed while building this job
    tmp = building / f"job-{job.pk}-{uuid.uuid4().hex}"
    try:
        ExportJob.objects.filter(pk=job.pk).update(phase="near-duplicate scan")
        near_duplicates_detect(project=project)
        ExportJob.objects.filter(pk=job.pk).update(phase="splits")
        plan = split_plan(project=project)
        if not plan.integrity.ok:
            raise RuntimeError(f"split integrity check failed: {plan.integrity.as_dict()}")
        result = release_build(project=project, plan=plan, dest=tmp, progress=_progress_writer(job))
        return _publish(job=job, tmp=tmp, result=result)
    except Exception as exc:
        log.exception("export job %s failed", job.pk)
        shutil.rmtree(tmp, ignore_errors=True)
        ExportJob.objects.filter(pk=job.pk).update(
            status=ExportJob.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:4000], finished_at=timezone.now(),
            phase="failed",
        )
        return None


def _publish(*, job: ExportJob, tmp, result) -> Release:
    project = job.project
    final = None
    try:
        with transaction.atomic():
            Project.objects.select_for_update().filter(pk=project.pk).first()  # serializes numbering
            number = (Release.objects.filter(project=project).aggregate(n=Max("number"))["n"] or 0) + 1
            directory = f"{project.pk}/v{number}"
            final = releases_root() / directory
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists():  # left by a crash between the move and the commit: never published
                shutil.rmtree(final)
            release = Release.objects.create(
                project=project, number=number, directory=directory, manifest=result.manifest,
                manifest_sha256=result.manifest_digest.sha256, record_count=result.record_count,
                created_by=job.created_by,
            )
            ExportJob.objects.filter(pk=job.pk).update(
                status=ExportJob.Status.DONE, release=release, phase="published", finished_at=timezone.now(),
                progress_done=F("progress_total"),
            )
            os.replace(tmp, final)
    except BaseException:
        if final is not None and final.exists() and not tmp.exists():
            shutil.rmtree(final, ignore_errors=True)  # moved, but the commit failed
        raise
    return release


# ------------------------------------------------------------------------------------------
# API tokens
# ------------------------------------------------------------------------------------------

def api_token_get_or_create(*, user):
    from rest_framework.authtoken.models import Token

    token, _ = Token.objects.get_or_create(user=user)
    return token


def api_token_regenerate(*, user):
    """Replace the user's token: the old one stops working at once."""
    from rest_framework.authtoken.models import Token

    with transaction.atomic():
        Token.objects.filter(user=user).delete()
        return Token.objects.create(user=user)


def api_token_revoke(*, user) -> bool:
    """Delete the user's token (it stops working at once); True if there was one."""
    from rest_framework.authtoken.models import Token

    deleted, _ = Token.objects.filter(user=user).delete()
    return bool(deleted)
