from __future__ import annotations

import hashlib
import logging
import uuid
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from projects.imaging import ImageRejected, check_image, store_image
from projects.models import ImportJob, Item, Membership, Project, Role, SchemaVersion, WorkerHeartbeat
from projects.presets import PRESETS
from projects.schema import Schema
from projects.sources import ImportSource, MissingFile, SourceError

log = logging.getLogger(__name__)

KNOWN_COLUMNS = {"image", "text", "title", "source_dataset", "source_id", "language", "domain", "license", "redistributable", "metadata"}
_TRUE = {"1", "true", "yes", "y", "redistributable", "open", "allowed"}
_FALSE = {"", "0", "false", "no", "n", "restricted", "reference-only", "not-allowed"}
PROGRESS_EVERY = 25


def project_create(*, name: str, slug: str, preset: str, lead=None, annotators_per_item: int | None = None) -> Project:
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r} (known: {', '.join(PRESETS)})")
    conf = PRESETS[preset]
    Schema(conf["schema"])  # a preset that does not validate is a bug: fail loudly here
    with transaction.atomic():
        project = Project.objects.create(
            name=name,
            slug=slug,
            preset=preset,
            schema=conf["schema"],
            schema_version=conf["schema"].get("version", 1),
            guideline=conf["guideline"],
            annotators_per_item=annotators_per_item or conf["annotators_per_item"],
            split_ratios=[0.85, 0.05, 0.10],
        )
        SchemaVersion.objects.create(project=project, version=project.schema_version, schema=project.schema)
        if lead is not None:
            Membership.objects.create(project=project, user=lead, role=Role.LEAD)
        from adjudication.services import lexicon_seed

        lexicon_seed(project=project)
    return project


def project_schema_update(*, project: Project, schema: dict) -> Project:
    """Replace the schema (validated) as a new version; old versions are kept."""
    Schema(schema)
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)
        project.schema_version += 1
        project.schema = {**schema, "version": project.schema_version}
        project.save(update_fields=["schema", "schema_version"])
        SchemaVersion.objects.create(project=project, version=project.schema_version, schema=project.schema)
    return project


def membership_add(*, project: Project, user, role: str) -> Membership:
    if role not in Role.values:
        raise ValueError(f"unknown role {role!r}")
    membership, _ = Membership.objects.get_or_create(project=project, user=user, role=role)
    return membership


def _as_bool(value, *, row_errors: list[str]) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if value is not None else ""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    row_errors.append(f"license flag {value!r} is not one of yes/no/true/false")
    return False


def _import_key(source_id: str, pixel_hash: str, text: str) -> str:
    if source_id:
        return hashlib.sha256(b"sid:" + source_id.encode()).hexdigest()
    return hashlib.sha256(b"px:" + pixel_hash.encode() + b"\0" + text.encode()).hexdigest()


def _import_row(*, project: Project, source: ImportSource, row: dict, seen_source_ids: set[str]) -> tuple[str, str | None]:
    """Import one manifest row. Returns (outcome, reason): imported / present / duplicate / error."""
    errors: list[str] = []
    image_ref = row.get("image")
    text = row.get("text")
    if not isinstance(image_ref, str) or not image_ref.strip():
        return "error", "missing image path"
    if not isinstance(text, str) or not text.strip():
        return "error", "missing text"
    if "\x00" in text:
        return "error", "text contains a NUL character"
    source_id = str(row.get("source_id") or "").strip()[:200]
    if source_id:
        if source_id in seen_source_ids:
            return "error", f"duplicate source id {source_id!r} in this manifest"
        seen_source_ids.add(source_id)
    redistributable = _as_bool(row.get("redistributable", row.get("license")), row_errors=errors)
    if errors:
        return "error", "; ".join(errors)
    metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    metadata = {**metadata, **{k: v for k, v in row.items() if k not in KNOWN_COLUMNS}}
    if source_id and Item.objects.filter(project=project, source_id=source_id).exists():
        return "present", None
    try:
        data = source.read(image_ref)
        checked = check_image(data)
    except MissingFile as exc:
        return "error", str(exc)
    except ImageRejected as exc:
        return "error", str(exc)
    key = _import_key(source_id, checked.pixel_hash, text)
    if Item.objects.filter(project=project, import_key=key).exists():
        return "present", None
    rel = store_image(checked)
    first = (
        Item.objects.filter(project=project, pixel_hash=checked.pixel_hash, duplicate_of__isnull=True)
        .order_by("id")
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
                text=text,
                title=str(row.get("title") or "")[:500],
                source_dataset=str(row.get("source_dataset") or "")[:200],
                source_id=source_id,
                language=str(row.get("language") or "")[:20],
                domain=str(row.get("domain") or "")[:100],
                redistributable=redistributable,
                metadata=metadata,
                duplicate_of=first,
            )
    except IntegrityError:
        # A concurrent import of the same manifest won the race: the row is present, not lost.
        return "present", None
    return ("duplicate" if first else "imported"), None


def import_job_create(*, project: Project, user, source_name: str, upload_path: str = "") -> ImportJob:
    return ImportJob.objects.create(project=project, created_by=user, source_name=source_name[:300], upload_path=upload_path)


def import_job_run(*, job: ImportJob, path: str | Path | None = None) -> ImportJob:
    """Import every row of the job's source; a bad row is reported and the others still land.

    Each row commits on its own, so a crash mid-way loses nothing already imported, and
    re-running the job (or the same manifest) only adds what is missing.
    """
    path = Path(path or job.upload_path)
    job.status = ImportJob.Status.RUNNING
    job.save(update_fields=["status"])
    try:
        source = ImportSource(path)
    except SourceError as exc:
        job.status, job.message, job.finished_at = ImportJob.Status.FAILED, str(exc), timezone.now()
        job.save(update_fields=["status", "message", "finished_at"])
        return job
    errors: list[dict] = []
    seen: set[str] = set()
    counts = {"imported": 0, "present": 0, "duplicate": 0}
    try:
        rows = list(source.rows())
        job.rows_total = len(rows)
        job.save(update_fields=["rows_total"])
        for done, (number, row, error) in enumerate(rows, start=1):
            if error is None:
                try:
                    outcome, error = _import_row(project=job.project, source=source, row=row, seen_source_ids=seen)
                except Exception as exc:  # noqa: BLE001 - one bad row never aborts the import
                    log.exception("import row %s failed", number)
                    outcome, error = "error", f"unexpected error ({type(exc).__name__})"
                if outcome != "error":
                    counts[outcome] += 1
            if error is not None:
                sid = row.get("source_id") if isinstance(row, dict) else None
                errors.append({"row": number, "source_id": sid, "image": (row or {}).get("image"), "reason": error})
            if done % PROGRESS_EVERY == 0:
                ImportJob.objects.filter(pk=job.pk).update(rows_done=done)
        job.status = ImportJob.Status.DONE
    except SourceError as exc:
        job.status, job.message = ImportJob.Status.FAILED, str(exc)
    finally:
        source.close()
    job.rows_done = job.rows_total
    job.imported = counts["imported"] + counts["duplicate"]
    job.exact_duplicates = counts["duplicate"]
    job.already_present = counts["present"]
    job.errors = errors
    job.finished_at = timezone.now()
    job.save()
    if job.upload_path and Path(job.upload_path).is_file():
        Path(job.upload_path).unlink(missing_ok=True)
    return job


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
                raise ValueError(f"upload larger than {settings.CONCORD_MAX_UPLOAD_BYTES:,} bytes")
            fh.write(chunk)
    return str(path)


def item_stage_set(*, item: Item, stage: str) -> None:
    Item.objects.filter(pk=item.pk).update(stage=stage)
    item.stage = stage


def heartbeat_record(*, token: str, hostname: str) -> WorkerHeartbeat:
    beat, _ = WorkerHeartbeat.objects.get_or_create(token=token, defaults={"hostname": hostname})
    return beat

