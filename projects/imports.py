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
import uuid
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from core.errors import Invalid, TooLarge
from core.jobs import JobFailed, Progress, job_cleanup_register, job_enqueue, job_finish, job_run
from projects import hooks
from projects.imaging import ImageRejected, check_image, store_image
from projects.models import ImportJob, Item, Project
from projects.sources import ImportSource, Limits, MissingFile, Problem, Row, SourceError

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


def import_job_run(*, job: ImportJob, path: str | Path | None = None) -> ImportJob:
    """Run the import in this process (the Celery task, the management command, tests).

    ``path`` overrides the job's source (command-line imports of a folder).
    """
    if path is not None:
        ImportJob.objects.filter(pk=job.pk).update(source_path=str(path)[:500])
    done = job_run(ImportJob, job.pk, _import_work)
    if done is None:  # not claimed: finished already, or alive in another worker
        done = ImportJob.objects.get(pk=job.pk)
    if done.status == ImportJob.Status.DONE:
        _delete_upload(done)
    return done


def _delete_upload(job: ImportJob) -> None:
    uploads = (Path(settings.VAR_DIR) / "uploads").resolve()
    if job.upload_path:
        path = Path(job.upload_path).resolve()
        if uploads in path.parents:
            path.unlink(missing_ok=True)


job_cleanup_register(ImportJob, _delete_upload)


class _Report:
    """Counters and the bounded problem list of one import, checkpointed with the progress."""

    def __init__(self, job: ImportJob):
        self.counts = {
            "imported": job.imported,
            "already_present": job.already_present,
            "exact_duplicates": job.exact_duplicates,
            "refused": job.refused,
        }
        self.errors: list[dict] = list(job.errors or [])
        self.error_counts: dict[str, int] = dict(job.error_counts or {})

    def refuse(self, row: Row, problem: Problem) -> None:
        self.counts["refused"] += 1
        seen = self.error_counts.get(problem.kind, 0)
        self.error_counts[problem.kind] = seen + 1
        if seen < PROBLEMS_PER_KIND:
            data = row.data if isinstance(row.data, dict) else {}
            self.errors.append(
                {
                    "row": row.number,
                    "kind": problem.kind,
                    "reason": problem.reason[:500],
                    "source_id": _short(data.get("source_id")),
                    "image": _short(data.get("image")),
                }
            )

    def fields(self) -> dict:
        return {**self.counts, "errors": self.errors, "error_counts": self.error_counts}


def _short(value) -> str | None:
    return None if value is None else str(value)[:200]


def _import_work(job: ImportJob, progress: Progress) -> None:
    limits = Limits.from_settings()
    report = _Report(job)
    resume = job.progress_done  # rows before this were read and checkpointed by an earlier attempt
    since = job.started_at if job.attempts > 1 else None
    seen: set[int] = set()
    try:
        source = ImportSource(job.source_path or job.upload_path)
    except SourceError as exc:
        raise JobFailed(str(exc)) from None
    with source:
        try:
            progress(resume, source.count_rows(limits), phase="importing rows", force=True)
            for index, row in enumerate(source.rows(limits)):
                if index < resume:  # read by an earlier attempt; its source id still counts as seen
                    if row.problem is None and isinstance(row.data, dict):
                        source_id = str(row.data.get("source_id") or "").strip()
                        if source_id and _check_row(row.data)[1] is None:
                            seen.add(_source_digest(source_id))
                    continue
                if row.problem is not None:
                    report.refuse(row, row.problem)
                else:
                    try:
                        outcome, problem = _import_row(
                            project=job.project, source=source, row=row.data, seen_source_ids=seen, since=since
                        )
                    except Exception as exc:
                        log.exception("import job %s row %s failed", job.pk, row.number)
                        outcome, problem = "error", Problem("internal", f"unexpected error ({type(exc).__name__})")
                    if problem is not None:
                        report.refuse(row, problem)
                    elif outcome == "present":
                        report.counts["already_present"] += 1
                    else:
                        report.counts["imported"] += 1
                        report.counts["exact_duplicates"] += outcome == "duplicate"
                progress(index + 1, max(progress.total, index + 1), **report.fields())
        except SourceError as exc:
            raise JobFailed(f"{exc} (rows read before were imported)") from None
    progress(force=True, **report.fields())
    job_finish(job, **report.fields())
    if report.counts["imported"]:
        hooks.items_imported.send(project=job.project, job=job)


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


def _check_row(row: dict) -> tuple[dict | None, Problem | None]:
    """The row's clean fields, or the problem that refuses it (no database, no image)."""
    image_ref, text = row.get("image"), row.get("text")
    if not isinstance(image_ref, str) or not image_ref.strip():
        return None, Problem("missing_image", "missing image path")
    if not isinstance(text, str) or not text.strip():
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


def _import_row(
    *, project: Project, source: ImportSource, row: dict, seen_source_ids: set[int], since=None
) -> tuple[str, Problem | None]:
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

    clean, problem = _check_row(row)
    if problem is not None:
        return "error", problem
    source_id = clean["source_id"]
    if source_id:
        digest = _source_digest(source_id)
        if digest in seen_source_ids:
            return "error", Problem("duplicate_source_id", f"duplicate source id {source_id!r} in this manifest")
        seen_source_ids.add(digest)
        if Item.objects.filter(project=project, source_id=source_id).exists():
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
