"""Importing items: uploads, import jobs and their rows (SPEC section 1 step 0).

Every row is checked on its own; a bad row is refused with a reason and the good rows still
land. Each row commits on its own, so a crash mid-way loses nothing already imported, and
re-running a job (or the same manifest) only adds what is missing (``Item.import_key``).

Bounded: the manifest is streamed (projects.sources), every row, text and metadata has a
size limit, and the report keeps the first ``PROBLEMS_PER_KIND`` problems of each kind and
counts the rest, so a million bad rows make a small page.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
import uuid
from collections import OrderedDict
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Min, Sum
from django.utils import timezone

from core.errors import Invalid, TooLarge
from core.jobs import (
    JobCancelled,
    JobFailed,
    Progress,
    chunk_run,
    chunks_to_send,
    job_cleanup_register,
    job_enqueue,
    job_finish,
    job_run,
    task_send,
)
from core.models import ACTIVE, JobStatus
from projects import hooks
from projects.imaging import ImageRejected, check_image, store_image
from projects.models import ImportChunk, ImportJob, Item, Project
from projects.ocr import ocr_job_start
from projects.sources import ImportSource, Limits, MissingFile, Problem, SourceError

log = logging.getLogger(__name__)

KNOWN_COLUMNS = {
    "image",
    "text",
    "title",
    "source_dataset",
    "source_id",
    "language",
    "domain",
    "license",
    "redistributable",
    "metadata",
}
_TRUE = {"1", "true", "yes", "y", "redistributable", "open", "allowed"}
_FALSE = {"", "0", "false", "no", "n", "restricted", "reference-only", "not-allowed"}
PROBLEMS_PER_KIND = 50
#: Rows per chunk: ~2 s of one core (full decode + hashes ~3.5 ms per image), small enough
#: for two workers to share a 20k-image import evenly, large enough that claims cost nothing.
CHUNK_ROWS = 500
CHECKPOINT_SECONDS = 0.5
CHUNK_TASK = "projects.import_chunk"
MAX_STOPPED = 2000


def upload_save(*, uploaded_file) -> str:
    """Spool an uploaded zip to the uploads folder (outside MEDIA_ROOT; never served)."""
    folder = Path(settings.VAR_DIR) / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{uuid.uuid4().hex}.zip"
    size = 0
    with open(path, "wb") as fh:
        for chunk in uploaded_file.chunks():
            size += len(chunk)
            if size > settings.CONCORD_MAX_UPLOAD_BYTES:
                fh.close()
                path.unlink(missing_ok=True)
                raise TooLarge(
                    f"The upload is larger than {settings.CONCORD_MAX_UPLOAD_BYTES:,} bytes.",
                    errors={"file": "too large"},
                )
            fh.write(chunk)
    return str(path)


def import_job_create(
    *, project: Project, user, source_name: str, source_path: str | Path = "", upload_path: str = ""
) -> ImportJob:
    return ImportJob.objects.create(
        project=project,
        created_by=user if user is not None and user.is_authenticated else None,
        source_name=source_name[:300],
        source_path=str(source_path or upload_path)[:500],
        upload_path=upload_path,
    )


def import_job_start(*, project: Project, user, uploaded_file) -> ImportJob:
    """Save the upload and queue its import (the lead's page, the REST API)."""
    name = uploaded_file.name or "upload.zip"
    if not name.lower().endswith(".zip"):
        raise Invalid("Upload a .zip file holding the images and a manifest.", errors={"file": "must be a .zip"})
    path = upload_save(uploaded_file=uploaded_file)
    with transaction.atomic():
        job = import_job_create(project=project, user=user, source_name=name, upload_path=path)
        job_enqueue(job)
    return job


def import_job_run(*, job: ImportJob, path: str | Path | None = None, fan_out: bool = False) -> ImportJob:
    """Run the import: read the manifest into chunks, import them, publish the result.

    ``fan_out`` (the Celery task): the chunks become tasks of their own that any number of
    workers run, and the last chunk to end finishes the job. Otherwise (the management
    command, the demo, tests) every chunk runs here, in order. ``path`` overrides the job's
    source (command-line imports of a folder).
    """
    if path is not None:
        ImportJob.objects.filter(pk=job.pk).update(source_path=str(path)[:500])
    job_run(ImportJob, job.pk, lambda j, progress: _import_work(j, progress, fan_out=fan_out))
    return ImportJob.objects.get(pk=job.pk)


def _chunk_folder(job: ImportJob) -> Path:
    return Path(settings.VAR_DIR) / "imports" / f"job-{job.pk}"


def _delete_upload(job: ImportJob) -> None:
    """The temporary upload and the chunk files: gone once the job ended, whatever way."""
    uploads = (Path(settings.VAR_DIR) / "uploads").resolve()
    if job.upload_path:
        path = Path(job.upload_path).resolve()
        if uploads in path.parents:
            path.unlink(missing_ok=True)
    shutil.rmtree(_chunk_folder(job), ignore_errors=True)


job_cleanup_register(ImportJob, _delete_upload)


class _Report:
    """Counters and the bounded problem list of the rows one worker handled (the manifest
    reading, or one chunk); merged into the job's report when the last chunk ends."""

    def __init__(self, counts: dict | None = None, errors: list | None = None, error_counts: dict | None = None):
        self.counts = {k: int((counts or {}).get(k, 0)) for k in COUNTERS}
        self.errors: list[dict] = list(errors or [])
        self.error_counts: dict[str, int] = dict(error_counts or {})

    def refuse(self, number: int, data, problem: Problem) -> None:
        self.counts["refused"] += 1
        seen = self.error_counts.get(problem.kind, 0)
        self.error_counts[problem.kind] = seen + 1
        if seen < PROBLEMS_PER_KIND:
            data = data if isinstance(data, dict) else {}
            self.errors.append(
                {
                    "row": number,
                    "kind": problem.kind,
                    "reason": problem.reason[:500],
                    "source_id": _short(data.get("source_id")),
                    "image": _short(data.get("image")),
                }
            )

    def count(self, outcome: str) -> None:
        if outcome == "present":
            self.counts["already_present"] += 1
        else:
            self.counts["imported"] += 1
            self.counts["exact_duplicates"] += outcome == "duplicate"

    def merge(self, other: _Report) -> None:
        for k in COUNTERS:
            self.counts[k] += other.counts[k]
        for problem in other.errors:
            kept = sum(1 for e in self.errors if e["kind"] == problem["kind"])
            if kept < PROBLEMS_PER_KIND:
                self.errors.append(problem)
        for kind, n in other.error_counts.items():
            self.error_counts[kind] = self.error_counts.get(kind, 0) + n

    def fields(self) -> dict:
        return {**self.counts, "errors": self.errors, "error_counts": self.error_counts}


COUNTERS = ("imported", "already_present", "exact_duplicates", "refused")


def _short(value) -> str | None:
    return None if value is None else str(value)[:200]


# --- reading the manifest into chunks --------------------------------------------------------


def _import_work(job: ImportJob, progress: Progress, *, fan_out: bool) -> None:
    """The job's own task: read the manifest into chunks (once), then run or send them."""
    if not job.planned:
        _plan(job, progress)
        job.refresh_from_db()
    progress.done, progress.total = job.progress_done, job.progress_total
    progress(phase="importing rows", force=True)
    if fan_out:
        # Also what a takeover does: chunks whose worker was lost are sent again.
        for chunk_id in chunks_to_send(ImportChunk.objects.filter(job=job)):
            task_send(CHUNK_TASK, chunk_id)
    else:
        for chunk_id in chunks_to_send(ImportChunk.objects.filter(job=job)):
            import_chunk_run(chunk_id=chunk_id)
    import_finish_if_complete(job_id=job.pk)


def _plan(job: ImportJob, progress: Progress) -> None:
    """Stream the manifest once: refuse what a row alone shows is wrong (shape, limits, a source
    id seen before in this manifest), write the other rows into chunk files of CHUNK_ROWS rows
    and create their chunk rows. All or nothing: an attempt killed half-way plans again."""
    limits = Limits.from_settings()
    report = _Report()
    folder = _chunk_folder(job)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    seen: set[int] = set()
    chunks: list[ImportChunk] = []
    out, rows_in_chunk, read = None, 0, 0
    stopped = ""
    try:
        source = ImportSource(job.source_path or job.upload_path)
    except SourceError as exc:
        raise JobFailed(str(exc)) from None
    progress(0, 0, phase="reading the manifest", force=True)
    with source:
        try:
            for row in source.rows(limits):
                read += 1
                problem = row.problem
                if problem is None:
                    clean, problem = _check_row(row.data, text_optional=job.project.ocr_on_import)
                if problem is None and clean["source_id"]:
                    digest = _source_digest(clean["source_id"])
                    if digest in seen:
                        problem = Problem(
                            "duplicate_source_id", f"duplicate source id {clean['source_id']!r} in this manifest"
                        )
                    seen.add(digest)
                if problem is not None:
                    report.refuse(row.number, row.data, problem)
                    continue
                if out is None or rows_in_chunk == CHUNK_ROWS:
                    if out is not None:
                        out.close()
                    chunks.append(ImportChunk(job=job, number=len(chunks), first_row=row.number, rows=0))
                    out = open(folder / f"chunk-{len(chunks) - 1}.jsonl", "wb")  # noqa: SIM115 - spans rows; closed below
                    rows_in_chunk = 0
                out.write(json.dumps({"n": row.number, "d": row.data}, ensure_ascii=False).encode() + b"\n")
                chunks[-1].rows += 1
                rows_in_chunk += 1
                if read % 1000 == 0:
                    progress(0, read, phase="reading the manifest")
        except SourceError as exc:
            stopped = f"{exc} (the rows read before it were imported)"
        finally:
            if out is not None:
                out.close()
    with transaction.atomic():
        ImportChunk.objects.filter(job=job).delete()
        ImportChunk.objects.bulk_create(chunks, batch_size=1000)
        ImportJob.objects.filter(pk=job.pk).update(
            planned=True,
            stopped_reason=stopped[:MAX_STOPPED],
            plan_report=report.fields(),
            progress_total=read,
            progress_done=report.counts["refused"],
            heartbeat_at=timezone.now(),
            **report.fields(),
        )


# --- one chunk -----------------------------------------------------------------------------


def import_chunk_run(*, chunk_id: int) -> ImportChunk | None:
    """Import one chunk's rows (a Celery task, or inline). Claims the chunk (a conditional
    update; a chunk whose worker was lost is claimed again and resumes after its last
    checkpoint), then ends the job if this was the last open chunk."""
    chunk = chunk_run(
        ImportChunk, chunk_id, lambda c: _chunk_work(ImportJob.objects.select_related("project").get(pk=c.job_id), c)
    )
    if chunk is None:
        return None
    import_finish_if_complete(job_id=chunk.job_id)
    return ImportChunk.objects.get(pk=chunk.pk)


def _chunk_work(job: ImportJob, chunk: ImportChunk) -> None:
    report = _Report(
        {k: getattr(chunk, k) for k in COUNTERS}, chunk.errors, chunk.error_counts
    )  # what an earlier attempt checkpointed
    resume = chunk.rows_done
    # A chunk taken over from a lost worker: rows after its last checkpoint may be in already.
    since = chunk.first_started_at if chunk.attempts > 1 else None
    if chunk.attempts == 1:
        ImportChunk.objects.filter(pk=chunk.pk).update(first_started_at=chunk.started_at)
    source = _source_for(job)
    last = time.monotonic()
    done = resume
    with open(_chunk_folder(job) / f"chunk-{chunk.number}.jsonl", "rb") as fh:
        for index, line in enumerate(fh):
            if index < resume:
                continue
            entry = json.loads(line)
            number, data = entry["n"], entry["d"]
            try:
                outcome, problem = _import_row(project=job.project, source=source, row=data, since=since)
            except Exception as exc:
                log.exception("import job %s row %s failed", job.pk, number)
                outcome, problem = "error", Problem("internal", f"unexpected error ({type(exc).__name__})")
            if problem is not None:
                report.refuse(number, data, problem)
            else:
                report.count(outcome)
            done = index + 1
            if time.monotonic() - last >= CHECKPOINT_SECONDS:
                last = time.monotonic()
                _checkpoint(job, chunk, done, report)
    _checkpoint(job, chunk, done, report, status=JobStatus.DONE)


def _checkpoint(job: ImportJob, chunk: ImportChunk, done: int, report: _Report, status=None) -> None:
    """The chunk's rows and counters in one UPDATE (a resumed chunk continues from here), the
    chunk's and the job's heartbeat, the job's progress; JobCancelled when a lead cancelled."""
    now = timezone.now()
    fields = {"rows_done": done, "heartbeat_at": now, **report.fields()}
    if status is not None:
        fields.update(status=status, finished_at=now)
    if not ImportChunk.objects.filter(pk=chunk.pk, status=JobStatus.RUNNING).update(**fields):
        raise JobCancelled("the chunk was taken over or ended elsewhere")
    rows = ImportChunk.objects.filter(job_id=job.pk).aggregate(n=Sum("rows_done"))["n"] or 0
    planned_refused = (job.plan_report or {}).get("refused", 0)
    ImportJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
        progress_done=planned_refused + rows, heartbeat_at=now
    )
    if ImportJob.objects.filter(pk=job.pk, cancel_requested=True).exists():
        raise JobCancelled("cancelled")


# Workers import many chunks of one source: its zip directory is read once per process.
_SOURCES: OrderedDict[tuple, ImportSource] = OrderedDict()


def _source_for(job: ImportJob) -> ImportSource:
    path = Path(job.source_path or job.upload_path)
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    source = _SOURCES.get(key)
    if source is None:
        source = ImportSource(path)
        _SOURCES[key] = source
        while len(_SOURCES) > 2:
            _SOURCES.popitem(last=False)[1].close()
    _SOURCES.move_to_end(key)
    return source


# --- the end of the job --------------------------------------------------------------------


def import_finish_if_complete(*, job_id: int) -> bool:
    """Publish the job's report when no chunk is open; exactly one caller does (conditional
    update). Exact duplicates found by chunks running side by side (each saw no earlier copy)
    are linked to the earliest copy first, as a sequential import would have."""
    job = ImportJob.objects.select_related("project").get(pk=job_id)
    if not job.planned or job.finished:
        return False
    if ImportChunk.objects.filter(job=job, status__in=ACTIVE).exists():
        return False
    report = _Report(
        {k: (job.plan_report or {}).get(k, 0) for k in COUNTERS},
        (job.plan_report or {}).get("errors"),
        (job.plan_report or {}).get("error_counts"),
    )
    failed = []
    for chunk in ImportChunk.objects.filter(job=job).order_by("number"):
        report.merge(_Report({k: getattr(chunk, k) for k in COUNTERS}, chunk.errors, chunk.error_counts))
        if chunk.status == JobStatus.FAILED:
            failed.append(f"rows {chunk.first_row}+ (chunk {chunk.number}): {chunk.error}")
    report.counts["exact_duplicates"] += _link_exact_duplicates(job)
    report.errors.sort(key=lambda e: e["row"])  # manifest order, whoever found the problem
    fields = report.fields()
    if failed or job.stopped_reason:
        reason = "; ".join([job.stopped_reason, *failed][:5]) if job.stopped_reason else "; ".join(failed[:5])
        ended = ImportJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
            status=JobStatus.FAILED, error=reason[:4000], finished_at=timezone.now(), **fields
        )
    elif ImportChunk.objects.filter(job=job, status=JobStatus.CANCELLED).exists() or job.cancel_requested:
        ended = ImportJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
            status=JobStatus.CANCELLED, error="cancelled", finished_at=timezone.now(), **fields
        )
    else:
        ended = job_finish(job, **fields)
    if not ended:
        return False
    job.refresh_from_db()
    _delete_upload(job)
    if report.counts["imported"]:
        if job.project.ocr_on_import:
            ocr_job_start(project=job.project, user=job.created_by)
        hooks.items_imported.send(project=job.project, job=job)
    return True


def _link_exact_duplicates(job: ImportJob) -> int:
    """Items of this job whose pixels an earlier item has, not yet linked to it (two chunks
    imported copies at the same time): linked to the earliest copy. Returns how many."""
    since = job.started_at
    hashes = Item.objects.filter(project=job.project, created_at__gte=since).values("pixel_hash")
    groups = (
        Item.objects.filter(project=job.project, duplicate_of__isnull=True, pixel_hash__in=hashes)
        .values("pixel_hash")
        .annotate(first=Min("id"), n=Count("id"))
        .filter(n__gt=1)
    )
    linked = 0
    for group in groups:
        linked += (
            Item.objects.filter(project=job.project, pixel_hash=group["pixel_hash"], duplicate_of__isnull=True)
            .exclude(pk=group["first"])
            .update(duplicate_of_id=group["first"])
        )
    return linked


def _as_bool(value) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if value is not None else ""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def _import_key(source_id: str, pixel_hash: str, text: str) -> str:
    if source_id:
        return hashlib.sha256(b"sid:" + source_id.encode()).hexdigest()
    return hashlib.sha256(b"px:" + pixel_hash.encode() + b"\0" + text.encode()).hexdigest()


def _source_digest(source_id: str) -> int:
    """A 64-bit digest, not the string: a million ids stay a few tens of MB."""
    return int.from_bytes(hashlib.blake2b(source_id.encode(), digest_size=8).digest(), "big")


def _check_row(row: dict, *, text_optional: bool = False) -> tuple[dict | None, Problem | None]:
    """The row's clean fields, or the problem that refuses it (no database, no image). With
    ``text_optional`` (a project that OCRs its imports) a row without text is kept: the OCR
    job gives it the text read in its image."""
    image_ref, text = row.get("image"), row.get("text")
    if not isinstance(image_ref, str) or not image_ref.strip():
        return None, Problem("missing_image", "missing image path")
    if text_optional and (text is None or (isinstance(text, str) and not text.strip())):
        text = ""
    elif not isinstance(text, str) or not text.strip():
        return None, Problem("missing_text", "missing text")
    if "\x00" in text:
        return None, Problem("bad_text", "text contains a NUL character")
    if len(text) > settings.CONCORD_MAX_TEXT_LENGTH:
        return None, Problem("text_too_long", f"text longer than {settings.CONCORD_MAX_TEXT_LENGTH:,} characters")
    source_id = str(row.get("source_id") or "").strip()
    if len(source_id) > 200:
        return None, Problem("bad_source_id", "source id longer than 200 characters")
    redistributable = _as_bool(row.get("redistributable", row.get("license")))
    if redistributable is None:
        flag = str(row.get("redistributable", row.get("license")))[:50]
        return None, Problem("bad_license", f"license flag {flag!r} is not one of yes/no/true/false")
    metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    metadata = {**metadata, **{k: v for k, v in row.items() if k not in KNOWN_COLUMNS}}
    size = len(json.dumps(metadata, ensure_ascii=False, default=str))
    if size > settings.CONCORD_IMPORT_MAX_METADATA_BYTES:
        return None, Problem(
            "metadata_too_large", f"metadata of {size:,} bytes (limit {settings.CONCORD_IMPORT_MAX_METADATA_BYTES:,})"
        )
    return {
        "image": image_ref,
        "text": text,
        "source_id": source_id,
        "redistributable": redistributable,
        "metadata": metadata,
        "title": str(row.get("title") or "")[:500],
        "source_dataset": str(row.get("source_dataset") or "")[:200],
        "language": str(row.get("language") or "")[:20],
        "domain": str(row.get("domain") or "")[:100],
    }, None


def _import_row(*, project: Project, source: ImportSource, row: dict, since=None) -> tuple[str, Problem | None]:
    """Import one manifest row: (imported | duplicate | present | error, problem).

    ``since``: the start of a job resumed after a lost worker; a row whose item was created
    since then was imported by this job's earlier attempt after its last checkpoint, and
    counts as imported (or duplicate), not as already present.
    """

    def present(lookup: dict) -> str:
        if since is not None:
            found = Item.objects.filter(project=project, **lookup).values_list("created_at", "duplicate_of_id").first()
            if found and found[0] >= since:
                return "duplicate" if found[1] else "imported"
        return "present"

    clean, problem = _check_row(row, text_optional=project.ocr_on_import)
    if problem is not None:
        return "error", problem
    source_id = clean["source_id"]
    if source_id and Item.objects.filter(project=project, source_id=source_id).exists():
        return present({"source_id": source_id}), None
    try:
        checked = check_image(source.read(clean["image"]))
    except MissingFile as exc:
        return "error", Problem("missing_file", str(exc))
    except ImageRejected as exc:
        return "error", Problem("bad_image", str(exc))
    key = _import_key(source_id, checked.pixel_hash, clean["text"])
    if Item.objects.filter(project=project, import_key=key).exists():
        return present({"import_key": key}), None
    rel = store_image(checked)
    first = (
        Item.objects.filter(project=project, pixel_hash=checked.pixel_hash, duplicate_of__isnull=True)
        .order_by("id")
        .only("id")
        .first()
    )
    try:
        with transaction.atomic():
            Item.objects.create(
                project=project,
                import_key=key,
                image=rel,
                image_sha256=checked.sha256,
                image_format=checked.image_format,
                width=checked.width,
                height=checked.height,
                pixel_hash=checked.pixel_hash,
                phash=checked.phash,
                text=clean["text"],
                title=clean["title"],
                source_dataset=clean["source_dataset"],
                source_id=source_id,
                language=clean["language"],
                domain=clean["domain"],
                redistributable=clean["redistributable"],
                metadata=clean["metadata"],
                duplicate_of=first,
            )
    except IntegrityError:
        # A concurrent import of the same manifest won the race: the row is present, not lost.
        return "present", None
    return ("duplicate" if first else "imported"), None
