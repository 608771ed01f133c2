"""OCR of imported images and their text-free variants (MemeCap section 3.2), as one job kind.

``ocr_job_start`` queues an OcrJob over the project's items that have no ``ItemOcr`` yet; an
import of a project with ``ocr_on_import`` starts one when it ends. Each item is read by
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
from django.db.models import Exists, OuterRef

from core.errors import Invalid
from core.jobs import Progress, job_enqueue, job_finish, job_run
from lib.ocr import OcrError
from lib.textfree import encode_image, text_free_from_ocr
from projects.imaging import ImageRejected, check_image, image_path, store_image
from projects.models import Item, ItemOcr, ItemVariant, OcrJob, Project, VariantSource

log = logging.getLogger(__name__)

ENGINE = "rapidocr-onnxruntime PP-OCRv4 (lib.ocr)"
TEXTFREE = "textfree"


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


def ocr_job_run(*, job_id: int) -> OcrJob | None:
    return job_run(OcrJob, job_id, _ocr_work)


def _pending(project: Project):
    return (
        Item.objects.filter(project=project, duplicate_of__isnull=True)
        .exclude(Exists(ItemOcr.objects.filter(item=OuterRef("pk"))))
        .order_by("id")
    )


def _ocr_work(job: OcrJob, progress: Progress) -> None:
    project = job.project
    total = job.items_read + _pending(project).count()
    progress(job.items_read, total, phase="reading images", force=True)
    counts = {"items_read": job.items_read, "texts_filled": job.texts_filled, "unreadable": job.unreadable}
    while True:
        batch = list(_pending(project)[:50])
        if not batch:
            break
        for item in batch:
            outcome = item_ocr_read(item=item)
            counts["items_read"] += 1
            counts["texts_filled"] += outcome == "text_filled"
            counts["unreadable"] += outcome == "unreadable"
            progress.fields.update(counts)
            progress(counts["items_read"], max(total, counts["items_read"]), phase="reading images")
    progress(counts["items_read"], counts["items_read"], phase="done", force=True)
    job_finish(job, **counts)


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
