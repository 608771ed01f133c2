"""OCR of imported images and their text-free variants (MemeCap section 3.2), as one job kind.

``ocr_job_start`` queues an OcrJob over the project's items that have no ``ItemOcr`` yet; an
import of a project with ``ocr_on_import`` starts one when it ends. The job splits those items
into chunks of CHUNK_ITEMS (OcrChunk rows on core.jobs' chunk mechanism, as an import's rows
are), one Celery task each, so any number of workers read them side by side; the last chunk to
end publishes the counts, and the job's one progress bar counts the items of all chunks. Each item is read by
lib.ocr (rapidocr's PP-OCRv4 models ship inside the package), its text-free variant is painted
by lib.textfree (OpenCV inpainting of the OCR boxes), and both are stored in one transaction
per item, so a job taken over from a lost worker resumes with the items still lacking a result
(idempotent: ``ItemOcr`` is one-to-one, ``ItemVariant`` unique per item and kind). A row whose
manifest gave no text takes the OCR text (``Item.text_from_ocr``). An image OCR cannot read is
recorded with its reason and counted, never a failed job.

A lead may upload their own variant instead (``item_variant_upload``): it replaces the painted
one and a later OCR run leaves it alone.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Exists, OuterRef, Sum
from django.utils import timezone

from core.errors import Invalid
from core.jobs import (
    MAX_ERROR,
    JobCancelled,
    Progress,
    chunk_run,
    chunks_to_send,
    job_enqueue,
    job_finish,
    job_run,
    task_send,
)
from core.models import ACTIVE, JobStatus
from lib.ocr import OcrError
from lib.textfree import encode_image, text_free_from_ocr
from projects.imaging import ImageRejected, check_image, image_path, store_image
from projects.models import Item, ItemOcr, ItemVariant, OcrChunk, OcrJob, Project, VariantSource

log = logging.getLogger(__name__)

ENGINE = "rapidocr-onnxruntime PP-OCRv4 (lib.ocr)"
TEXTFREE = "textfree"
#: Items per chunk: about 5-10 s of one core (OCR and inpainting take 0.2-0.4 s per meme), so
#: the chunks of a run spread evenly over the workers and a lost one costs little to redo.
CHUNK_ITEMS = 25
CHUNK_TASK = "projects.ocr_chunk"


def ocr_job_start(*, project: Project, user=None, enqueue: bool = True) -> OcrJob:
    """Queue OCR of the project's items that have none yet (a running one is reused)."""
    with transaction.atomic():
        running = OcrJob.objects.filter(project=project, status__in=["pending", "running"]).first()
        if running is not None:
            return running
        job = OcrJob.objects.create(project=project, created_by=user)
        if enqueue:
            job_enqueue(job)
    return job


def ocr_job_run(*, job_id: int, fan_out: bool = False) -> OcrJob | None:
    """Run an OCR job: split the items still lacking a result into chunks, read them, publish.

    ``fan_out`` (the Celery task): each chunk becomes a task of its own that any number of
    workers run, and the last chunk to end finishes the job. Otherwise (the demo, tests) every
    chunk runs here, in order."""
    job = job_run(OcrJob, job_id, lambda job, progress: _ocr_work(job, progress, fan_out=fan_out))
    return OcrJob.objects.get(pk=job_id) if job is not None else None


def _pending(project: Project):
    return (
        Item.objects.filter(project=project, duplicate_of__isnull=True)
        .exclude(Exists(ItemOcr.objects.filter(item=OuterRef("pk"))))
        .order_by("id")
    )


def _ocr_work(job: OcrJob, progress: Progress, *, fan_out: bool) -> None:
    """The job's own task: plan the chunks (once), then run or send the open ones. A job taken
    over from a lost worker plans nothing again and re-sends the chunks whose worker was lost."""
    if not job.planned:
        ids = list(_pending(job.project).values_list("id", flat=True))
        chunks = [
            OcrChunk(job=job, number=n, item_ids=ids[i : i + CHUNK_ITEMS])
            for n, i in enumerate(range(0, len(ids), CHUNK_ITEMS))
        ]
        with transaction.atomic():
            OcrChunk.objects.filter(job=job).delete()
            OcrChunk.objects.bulk_create(chunks, batch_size=1000)
            OcrJob.objects.filter(pk=job.pk).update(planned=True, progress_total=len(ids), progress_done=0)
        progress.done, progress.total = 0, len(ids)
    progress(phase="reading images", force=True)
    for chunk_id in chunks_to_send(OcrChunk.objects.filter(job=job)):
        if fan_out:
            task_send(CHUNK_TASK, chunk_id)
        else:
            ocr_chunk_run(chunk_id=chunk_id)
    ocr_finish_if_complete(job_id=job.pk)


def ocr_chunk_run(*, chunk_id: int) -> OcrChunk | None:
    """Read one chunk's items (a Celery task, or inline), then end the job if this was the last
    open chunk. Claims the chunk with a conditional update, so of two deliveries one runs it."""
    chunk = chunk_run(OcrChunk, chunk_id, _chunk_work)
    if chunk is None:
        return None
    ocr_finish_if_complete(job_id=chunk.job_id)
    return OcrChunk.objects.get(pk=chunk.pk)


def _chunk_work(chunk: OcrChunk) -> None:
    job = OcrJob.objects.select_related("project").get(pk=chunk.job_id)
    pending = _pending(job.project).filter(pk__in=chunk.item_ids)
    done = len(chunk.item_ids) - pending.count()
    for item in pending.iterator(chunk_size=CHUNK_ITEMS):
        item_ocr_read(item=item)
        done += 1
        _checkpoint(job, chunk, done)
    _checkpoint(job, chunk, done, status=JobStatus.DONE)


def _checkpoint(job: OcrJob, chunk: OcrChunk, done: int, status=None) -> None:
    """The chunk's progress and heartbeat, the job's progress and heartbeat (one UPDATE each);
    JobCancelled when a lead cancelled the job or the chunk was taken over elsewhere."""
    now = timezone.now()
    fields = {"items_done": done, "heartbeat_at": now}
    if status is not None:
        fields.update(status=status, finished_at=now)
    if not OcrChunk.objects.filter(pk=chunk.pk, status=JobStatus.RUNNING).update(**fields):
        raise JobCancelled("the chunk was taken over or ended elsewhere")
    read = OcrChunk.objects.filter(job_id=job.pk).aggregate(n=Sum("items_done"))["n"] or 0
    OcrJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
        progress_done=read, items_read=read, heartbeat_at=now
    )
    if OcrJob.objects.filter(pk=job.pk, cancel_requested=True).exists():
        raise JobCancelled("cancelled")


def ocr_finish_if_complete(*, job_id: int) -> bool:
    """Publish the job's counts when no chunk is open; exactly one caller does (conditional
    update). The counts are read from what was stored for the job's items, so a chunk retried
    after a lost worker counts each item once."""
    job = OcrJob.objects.get(pk=job_id)
    if not job.planned or job.finished or OcrChunk.objects.filter(job=job, status__in=ACTIVE).exists():
        return False
    ids = [pk for chunk_ids in OcrChunk.objects.filter(job=job).values_list("item_ids", flat=True) for pk in chunk_ids]
    results = ItemOcr.objects.filter(item_id__in=ids)
    counts = {
        "items_read": results.count(),
        "unreadable": results.exclude(error="").count(),
        "texts_filled": Item.objects.filter(pk__in=ids, text_from_ocr=True).count(),
    }
    failed = [
        f"chunk {c.number} (items {c.item_ids[0]}-{c.item_ids[-1]}): {c.error}"
        for c in OcrChunk.objects.filter(job=job, status=JobStatus.FAILED).order_by("number")
    ]
    now = timezone.now()
    if failed:
        return bool(
            OcrJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
                status=JobStatus.FAILED, error="; ".join(failed[:5])[:MAX_ERROR], finished_at=now, **counts
            )
        )
    if job.cancel_requested or OcrChunk.objects.filter(job=job, status=JobStatus.CANCELLED).exists():
        return bool(
            OcrJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
                status=JobStatus.CANCELLED, error="cancelled", finished_at=now, **counts
            )
        )
    return job_finish(job, **counts)


def item_ocr_read(*, item: Item) -> str:
    """OCR one item and paint its text-free variant: "read", "text_filled" or "unreadable".
    Idempotent (an item already read is left as it is)."""
    try:
        data = image_path(item.image).read_bytes()
        variant, result = text_free_from_ocr(data)
    except (OcrError, OSError, ValueError) as exc:
        ItemOcr.objects.get_or_create(item=item, defaults={"engine": ENGINE, "error": str(exc)[:300]})
        log.warning("OCR of item %s failed: %s", item.pk, exc)
        return "unreadable"
    try:
        checked = check_image(encode_image(variant, "PNG"))
    except ImageRejected as exc:  # e.g. the painted PNG is over the import's byte limit
        ItemOcr.objects.get_or_create(
            item=item, defaults={"engine": ENGINE, "text": result.text, "error": f"variant not stored: {exc}"[:300]}
        )
        return "unreadable"
    stored = store_image(checked)
    outcome = "read"
    with transaction.atomic():
        _, created = ItemOcr.objects.get_or_create(
            item=item,
            defaults={"engine": ENGINE, "text": result.text, "lines": [line.as_dict() for line in result.lines]},
        )
        if not created:
            return "read"
        ItemVariant.objects.get_or_create(
            item=item,
            kind=TEXTFREE,
            defaults={
                "source": VariantSource.INPAINTED,
                "image": stored,
                "image_sha256": checked.sha256,
                "width": variant.width,
                "height": variant.height,
            },
        )
        if not item.text.strip() and result.text.strip():
            Item.objects.filter(pk=item.pk, text="").update(text=result.text, text_from_ocr=True)
            outcome = "text_filled"
    return outcome


def item_variant_upload(*, item: Item, kind: str, data: bytes, user=None) -> ItemVariant:
    """A lead's own variant of an item's image (replaces a painted one). The file goes through
    the import's checks (format, size, decompression bombs); its size must match the item's
    image, so boxes drawn on either refer to the same pixels."""
    if kind != TEXTFREE:
        raise Invalid(f"Unknown image variant {kind!r}.", errors={"kind": f"must be {TEXTFREE!r}"})
    try:
        checked = check_image(data)
    except ImageRejected as exc:
        raise Invalid(f"The variant was refused: {exc}", errors={"file": str(exc)}) from None
    if (checked.width, checked.height) != (item.width, item.height):
        msg = f"is {checked.width}×{checked.height}; the item's image is {item.width}×{item.height}"
        raise Invalid(f"The variant {msg}: upload one of the same size.", errors={"file": msg})
    rel = store_image(checked)
    variant, _ = ItemVariant.objects.update_or_create(
        item=item,
        kind=kind,
        defaults={
            "source": VariantSource.UPLOADED,
            "image": rel,
            "image_sha256": checked.sha256,
            "width": checked.width,
            "height": checked.height,
            "created_by": user,
        },
    )
    return variant
