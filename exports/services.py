"""Write paths of the exports app: near-duplicate detection and review, export jobs, releases,
API tokens."""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from array import array
from pathlib import Path

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone
from rest_framework.authtoken.models import Token

from adjudication.services import history_record
from core.errors import Busy, Invalid, StaleVersion
from core.jobs import (
    JobFailed,
    Progress,
    job_cancel,
    job_cleanup_register,
    job_enqueue,
    job_finish,
    job_repair_register,
    job_run,
)
from core.models import ACTIVE
from core.streams import stream
from exports.archive import ARCHIVE_INDEX, archive_name, archive_time, archive_write
from exports.build import ReleaseInputs, release_build
from exports.hub import HubConfigError, check_repo_id, hub_push_folder, hub_token
from exports.models import DedupScan, ExportJob, HubPush, NearDuplicatePair, PairStatus, Release, ReleaseSettings
from exports.selectors import release_dir, release_settings_get, released_gold_queryset, releases_root, split_plan
from lib.gcpause import gc_paused
from lib.hamming import near_duplicate_pairs
from lib.phash import phash_int
from projects.models import Item, Project

log = logging.getLogger(__name__)

PAIR_BATCH = 5000


# ------------------------------------------------------------------------------------------
# Near-duplicate detection
# ------------------------------------------------------------------------------------------


def near_duplicates_scan_start(*, project: Project, user=None) -> DedupScan:
    """Queue a near-duplicate scan (after an import; the reviewer's "scan now")."""
    with transaction.atomic():
        scan = DedupScan.objects.create(project=project, threshold=project.phash_threshold, created_by=user)
        job_enqueue(scan)
    return scan


def near_duplicates_detect(*, project: Project, chunk_size: int = 10_000, full: bool = False) -> DedupScan:
    """Scan now, in this process (the release build runs one before splitting). ``full``:
    search even when no item came since the last scan (bench/scale.py times the search)."""
    scan = DedupScan.objects.create(project=project, threshold=project.phash_threshold)
    return near_duplicates_scan_run(scan_id=scan.pk, chunk_size=chunk_size, full=full) or scan


def near_duplicates_scan_run(*, scan_id: int, chunk_size: int = 10_000, full: bool = False) -> DedupScan | None:
    return job_run(DedupScan, scan_id, lambda scan, progress: _scan(scan, progress, chunk_size=chunk_size, full=full))


SCAN_REUSED = DedupScan.REUSED_PHASE


def _scan_reused(scan: DedupScan, max_item_id: int) -> bool:
    """Finish ``scan`` from the last finished one when no item came since and its threshold
    covers this one: images never change after import, so the search would find exactly the
    stored pairs again (a 1M-item release saved ~11 s: bench/scale.py). Any new item (also one
    below the last scan's largest id), a deleted one, or a higher threshold takes the search."""
    last = (
        DedupScan.objects.filter(project=scan.project, status=DedupScan.Status.DONE, threshold__gte=scan.threshold)
        .exclude(pk=scan.pk)
        .order_by("-max_item_id", "-id")
        .first()
    )
    if last is None or last.max_item_id < max_item_id:
        return False
    # The same items, not only no higher id: an import that took its ids before the last scan
    # but committed after it adds items below its max_item_id (and a deletion changes the count).
    scannable = Item.objects.filter(project=scan.project, duplicate_of__isnull=True, pk__lte=max_item_id)
    if scannable.count() != last.items_scanned:
        return False
    found = NearDuplicatePair.objects.filter(project=scan.project, distance__lte=scan.threshold).count()
    job_finish(
        scan,
        items_scanned=last.items_scanned,
        max_item_id=max_item_id,
        pairs_found=found,
        pairs_new=0,
        phase=SCAN_REUSED,
    )
    return True


@gc_paused()
def _scan(scan: DedupScan, progress: Progress, *, chunk_size: int, full: bool = False) -> None:
    """Store every pair of the project's items within ``project.phash_threshold`` (exact search,
    lib.hamming.near_duplicate_pairs) as an unreviewed NearDuplicatePair.

    Idempotent: existing pairs, reviewed or not, are left alone (the unique constraint on
    (item_a, item_b) makes a concurrent or repeated scan add only the new ones). Items that are
    exact pixel duplicates of an earlier item are skipped (the exact rule handles them; their
    links to the original join them to its group when splitting), as are pairs of items with
    the same decoded pixels.
    """
    project = scan.project
    # Every item up to here is covered (exact copies through their original); later ones are not.
    max_item_id = Item.objects.filter(project=project).aggregate(n=Max("id"))["n"] or 0
    if not full and _scan_reused(scan, max_item_id):
        return
    ids = array("q")  # raw 64-bit values, not an object per item
    hashes = array("Q")
    pixel = array("Q")
    rows = (
        Item.objects.filter(project=project, duplicate_of__isnull=True, pk__lte=max_item_id)
        .order_by("id")
        .values_list("id", "phash", "pixel_hash")
    )
    progress(phase="reading hashes", force=True)
    for item_id, phash, pixel_hash in stream(rows, chunk_size):
        ids.append(item_id)
        hashes.append(phash_int(phash))
        pixel.append(int(pixel_hash[:16], 16))
        if len(ids) % chunk_size == 0:
            progress(phase="reading hashes")
    id_arr = np.asarray(ids, dtype=np.int64)
    h = np.asarray(hashes, dtype=np.uint64)
    px = np.asarray(pixel, dtype=np.uint64)
    del ids, hashes, pixel
    progress(phase="searching pairs", force=True)
    pairs = near_duplicate_pairs(h, scan.threshold)
    i, j = pairs[:, 0], pairs[:, 1]
    keep = px[i] != px[j]
    i, j = i[keep], j[keep]
    distance = np.bitwise_count(h[i] ^ h[j])
    before = NearDuplicatePair.objects.filter(project=project).count()
    a_ids, b_ids, dists = id_arr[i].tolist(), id_arr[j].tolist(), distance.tolist()
    for start in range(0, len(a_ids), PAIR_BATCH):
        NearDuplicatePair.objects.bulk_create(
            [
                NearDuplicatePair(project=project, item_a_id=a, item_b_id=b, distance=d)
                for a, b, d in zip(
                    a_ids[start : start + PAIR_BATCH],
                    b_ids[start : start + PAIR_BATCH],
                    dists[start : start + PAIR_BATCH],
                )
            ],
            ignore_conflicts=True,
        )
        progress(start + PAIR_BATCH, len(a_ids), phase="storing pairs")
    after = NearDuplicatePair.objects.filter(project=project).count()
    job_finish(
        scan, items_scanned=len(id_arr), max_item_id=max_item_id, pairs_found=len(a_ids), pairs_new=after - before
    )


def near_duplicate_pair_review(
    *, pair: NearDuplicatePair, reviewer, decision: str, expected_status: str
) -> NearDuplicatePair:
    """Judge a candidate pair "same" meme or "different" (a template with another text is different),
    or put it back to "unreviewed" (undo).

    ``expected_status`` is the status the reviewer saw: the write is a conditional UPDATE on it,
    so two people judging the same pair at once cannot silently overwrite each other (the second
    gets StaleVersion -> HTTP 409). Judging again later (a correction) is allowed.
    """
    if decision not in PairStatus.values:
        raise Invalid("Choose same or different.", errors={"decision": "must be 'same' or 'different'"})
    if expected_status not in PairStatus.values:
        raise Invalid("Bad form.", errors={"expected_status": f"must be one of {', '.join(PairStatus.values)}"})
    # "unreviewed" undoes a judgement (the reviewer's U key): the pair is back in the queue.
    undo = decision == PairStatus.UNREVIEWED
    now = None if undo else timezone.now()
    with transaction.atomic():
        updated = NearDuplicatePair.objects.filter(pk=pair.pk, status=expected_status).update(
            status=decision, reviewed_by=None if undo else reviewer, reviewed_at=now
        )
        if not updated:
            raise StaleVersion(
                "Someone judged this pair meanwhile; its current state is shown. Judge again if you disagree."
            )
        history_record(
            project=pair.project,
            item=pair.item_a,
            kind="near_duplicate_review",
            actor=reviewer,
            old={"pair": [pair.item_a_id, pair.item_b_id], "status": expected_status},
            new={"pair": [pair.item_a_id, pair.item_b_id], "status": decision},
        )
    pair.status, pair.reviewed_by, pair.reviewed_at = decision, None if undo else reviewer, now
    return pair


# ------------------------------------------------------------------------------------------
# Export jobs and releases
# ------------------------------------------------------------------------------------------


def export_job_start(*, project: Project, user, enqueue: bool = True) -> ExportJob:
    """Create a build job and enqueue it once committed.

    Refused (Invalid) when there is no gold to release; Busy when a build of the project is
    pending or running and alive (a partial unique constraint: one active job per project).
    A stalled build (its worker lost) does not block: it is cancelled and replaced.
    """
    if not released_gold_queryset(project=project).exists():
        raise Invalid("There is no gold record to release yet.")
    for active in ExportJob.objects.filter(project=project, status__in=ACTIVE):
        if active.stalled:
            job_cancel(active)
    try:
        with transaction.atomic():
            job = ExportJob.objects.create(project=project, created_by=user, phase="queued")
            if enqueue:
                job_enqueue(job)
    except IntegrityError:
        raise Busy("A release of this project is already being built; wait for it to finish or cancel it.") from None
    return job


def _build_folder(job: ExportJob) -> Path:
    return releases_root() / ".building"


def _remove_build_folders(job: ExportJob) -> None:
    for leftover in _build_folder(job).glob(f"job-{job.pk}-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _orphan_build_folders() -> int:
    """The sweeper's repair: build folders of jobs that ended without their own cleanup (a
    worker killed mid-build whose job was then cancelled or failed elsewhere); returns how many."""
    building = releases_root() / ".building"
    if not building.is_dir():
        return 0
    folders = {}
    for path in building.iterdir():
        parts = path.name.split("-")
        if path.is_dir() and len(parts) >= 3 and parts[0] == "job" and parts[1].isdigit():
            folders.setdefault(int(parts[1]), []).append(path)
    active = set(ExportJob.objects.filter(pk__in=folders, status__in=ACTIVE).values_list("pk", flat=True))
    removed = 0
    for pk, paths in folders.items():
        if pk not in active:
            for path in paths:
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
    return removed


job_cleanup_register(ExportJob, _remove_build_folders)
job_repair_register(ExportJob, _orphan_build_folders)


def export_job_run(*, job: ExportJob) -> Release | None:
    """Build the release into a temporary folder, then publish it atomically.

    Publishing = one transaction that numbers the release under a lock on the project row,
    creates the Release row, marks the job done and moves the folder into place with
    ``os.replace`` (atomic on one filesystem). Any failure before the commit removes the
    folder: a failed job leaves no files and no Release row, only the job's error message.
    A job taken over from a lost worker starts again from scratch (its folder is removed).
    """
    done = job_run(ExportJob, job.pk, _build)
    return done.release if done is not None and done.status == ExportJob.Status.DONE else None


def _build(job: ExportJob, progress: Progress) -> None:
    project = job.project
    building = _build_folder(job)
    building.mkdir(parents=True, exist_ok=True)
    _remove_build_folders(job)  # from a worker killed while building this job
    tmp = building / f"job-{job.pk}-{uuid.uuid4().hex}"
    inputs = ReleaseInputs(project)  # read beside the scan and the plan, where it can be
    progress(0, 0, phase="near-duplicate scan", force=True)
    near_duplicates_detect(project=project)
    progress(phase="splits", force=True)
    plan = split_plan(project=project)
    if not plan.integrity.ok:
        raise JobFailed(f"split integrity check failed: {plan.integrity.as_dict()}")

    def tick(phase: str, done: int, total: int) -> None:
        progress(done, total, phase=phase)

    result = release_build(project=project, plan=plan, dest=tmp, progress=tick, inputs=inputs)
    progress(phase="archive", force=True)
    # One active build per project (a constraint): the next number is this build's, so the
    # archive (whose folder name holds it) is laid out and hashed here, outside the lock.
    number = (Release.objects.filter(project=project).aggregate(n=Max("number"))["n"] or 0) + 1
    archive = _archive(tmp, project=project, number=number, data_as_of=result.manifest["data_as_of"])
    progress(phase="publishing", force=True)
    _publish(job=job, tmp=tmp, result=result, archive=(number, *archive))


def _archive(folder: Path, *, project: Project, number: int, data_as_of) -> tuple[str, int]:
    """Write the archive index of ``folder`` and return the archive's (sha256, bytes)."""
    return archive_write(folder, prefix=archive_name(project.slug, number) + "/", when=archive_time(data_as_of))


def _publish(*, job: ExportJob, tmp, result, archive: tuple[int, str, int]) -> Release:
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
            expected, archive_sha256, archive_bytes = archive
            if number != expected:  # another build published meanwhile (a cancelled, still-running one)
                archive_sha256, archive_bytes = _archive(
                    tmp, project=project, number=number, data_as_of=result.manifest["data_as_of"]
                )
            release = Release.objects.create(
                project=project,
                number=number,
                archive_sha256=archive_sha256,
                archive_bytes=archive_bytes,
                directory=directory,
                manifest=result.manifest,
                manifest_sha256=result.manifest_digest.sha256,
                record_count=result.record_count,
                created_by=job.created_by,
            )
            if not job_finish(job, release=release, phase="published"):
                raise JobFailed("the build was cancelled or taken over before it could publish")
            os.replace(tmp, final)
    except BaseException:
        if final is not None and final.exists() and not tmp.exists():
            shutil.rmtree(final, ignore_errors=True)  # moved, but the commit failed
        raise
    return release


def release_archive_prepare(*, release: Release) -> Release:
    """Give a release published before archives existed its archive index and checksum (once:
    later requests find them). Idempotent; concurrent first requests write the same bytes."""
    if release.archive_sha256 and (release_dir(release) / ARCHIVE_INDEX).is_file():
        return release
    sha256, size = _archive(
        release_dir(release),
        project=release.project,
        number=release.number,
        data_as_of=release.manifest.get("data_as_of"),
    )
    Release.objects.filter(pk=release.pk).update(archive_sha256=sha256, archive_bytes=size)
    release.archive_sha256, release.archive_bytes = sha256, size
    return release


# ------------------------------------------------------------------------------------------
# Release settings and publishing outward
# ------------------------------------------------------------------------------------------

SETTINGS_FIELDS = (
    "pretty_name",
    "license",
    "license_name",
    "license_url",
    "summary",
    "motivation",
    "creators",
    "funding",
    "languages",
    "task_categories",
    "collection",
    "annotators",
    "intended_uses",
    "prohibited_uses",
    "limitations",
    "personal_information",
    "maintenance",
    "contact",
    "homepage",
    "citation",
    "content_warning",
    "hub_repo",
)
_LICENSE_ID = re.compile(r"^[a-z0-9][a-z0-9.+-]{0,59}$")
_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})?$")
_TASK = re.compile(r"^[a-z0-9][a-z0-9-]{1,59}$")


def release_settings_update(*, project: Project, user, data: dict) -> ReleaseSettings:
    """Save what the card and datasheet of the next releases say (published ones keep theirs).

    Raises Invalid with per-field messages; the form re-renders with them."""
    errors: dict[str, str] = {}
    values = {name: str(data.get(name, "") or "").strip() for name in SETTINGS_FIELDS}
    values["license"] = values["license"].lower() or "other"
    if not _LICENSE_ID.match(values["license"]):
        errors["license"] = "a license id such as cc-by-4.0, cc-by-nc-sa-4.0, mit or other"
    if values["license"] == "other" and not values["license_name"]:
        errors["license_name"] = "name the license when the id is 'other'"
    for name in ("license_url", "homepage"):
        if values[name] and not re.match(r"^https?://\S+$", values[name]):
            errors[name] = "an http(s) URL"
    langs = [x.strip() for x in values["languages"].split(",") if x.strip()]
    if any(not _LANGUAGE.match(x) for x in langs):
        errors["languages"] = "ISO 639 codes separated by commas, e.g. en, hi"
    tasks = [x.strip() for x in values["task_categories"].split(",") if x.strip()]
    if any(not _TASK.match(x) for x in tasks):
        errors["task_categories"] = "Hugging Face task ids separated by commas, e.g. image-classification"
    if values["hub_repo"]:
        try:
            check_repo_id(values["hub_repo"])
        except HubConfigError as exc:
            errors["hub_repo"] = str(exc)
    for name, limit in (("pretty_name", 200), ("license_name", 200), ("contact", 300), ("hub_repo", 200)):
        if len(values[name]) > limit:
            errors[name] = f"at most {limit} characters"
    if errors:
        raise Invalid("Some release settings need attention.", errors=errors)
    values["languages"], values["task_categories"] = ", ".join(langs), ", ".join(tasks)
    with transaction.atomic():
        settings_row, _ = ReleaseSettings.objects.select_for_update().get_or_create(project=project)
        for name, value in values.items():
            setattr(settings_row, name, value)
        settings_row.updated_by = user
        settings_row.save()
    return settings_row


def hub_push_start(*, release: Release, user, repo_id: str = "", enqueue: bool = True) -> HubPush:
    """Queue a push of a published release to a Hub dataset repo (the project's ``hub_repo``
    unless given). Refused when no repo is named or the worker has no token."""
    repo_id = repo_id or release_settings_get(project=release.project).hub_repo
    try:
        repo_id = check_repo_id(repo_id)
        hub_token()
    except HubConfigError as exc:
        raise Invalid(f"Cannot push to the Hugging Face Hub: {exc}.") from None
    with transaction.atomic():
        push = HubPush.objects.create(
            project=release.project, release=release, repo_id=repo_id, created_by=user, phase="queued"
        )
        if enqueue:
            job_enqueue(push)
    return push


def hub_push_run(*, push_id: int) -> HubPush | None:
    return job_run(HubPush, push_id, _push)


def _push(push: HubPush, progress: Progress) -> None:
    release = push.release
    progress(phase="uploading", force=True)
    try:
        commit = hub_push_folder(
            folder=release_dir(release),
            repo_id=push.repo_id,
            message=f"{release.project.name} v{release.number} (Concord release, manifest sha256 "
            f"{release.manifest_sha256[:12]})",
            description=f"Manifest sha256 {release.manifest_sha256}; archive sha256 {release.archive_sha256}.",
        )
    except HubConfigError as exc:
        raise JobFailed(str(exc)) from None
    job_finish(push, commit_url=commit.url, files=commit.files, phase="pushed")


# ------------------------------------------------------------------------------------------
# API tokens
# ------------------------------------------------------------------------------------------


def api_token_get_or_create(*, user):
    token, _ = Token.objects.get_or_create(user=user)
    return token


def api_token_regenerate(*, user):
    """Replace the user's token: the old one stops working at once."""
    with transaction.atomic():
        Token.objects.filter(user=user).delete()
        return Token.objects.create(user=user)


def api_token_revoke(*, user) -> bool:
    """Delete the user's token (it stops working at once); True if there was one."""
    from rest_framework.authtoken.models import Token

    deleted, _ = Token.objects.filter(user=user).delete()
    return bool(deleted)
