"""Test data for exports, made through the services as people would make it: annotators claim
and submit, identical annotations become gold, disagreements are decided by a reviewer."""

from __future__ import annotations

from collections.abc import Callable

from annotation.factories import MEME3W_HARMFUL, MEME3W_NOT_HARMFUL, items_open, ready
from annotation.services import assignment_claim_next
from projects.factories import source_write
from projects.imports import import_job_create, import_job_run
from projects.models import Item, Project
from workflow.services import annotation_submit


def meme3w_values(item: Item) -> dict:
    """Harmful when the item's text says so ("harmful" in it), else non-harmful."""
    if "Zorg" in item.text:
        return dict(MEME3W_HARMFUL, text_mention="Planet Zorg" if "Planet Zorg" in item.text else None)
    return dict(MEME3W_NOT_HARMFUL)


def annotate_all(project: Project, annotators: list, *, values_for: Callable[[Item, object], dict]) -> int:
    """Every annotator claims and submits items until their queue is empty. Returns submissions."""
    n = 0
    for user in annotators:
        ready(user, project)
        while True:
            result = assignment_claim_next(annotator=user, project=project)
            if result.annotation is None:
                break
            annotation = result.annotation
            annotation_submit(
                annotator=user,
                item=annotation.item,
                values=values_for(annotation.item, user),
                version=annotation.version,
            )
            n += 1
    return n


def gold_create(
    project: Project, items: list[Item], annotators: list, *, values_for: Callable[[Item], dict] = meme3w_values
) -> None:
    """Identical annotations by every annotator: each item becomes gold without review."""
    items_open(items)
    annotate_all(project, annotators, values_for=lambda item, user: values_for(item))


def recompressed(data: bytes, *, quality: int = 40, scale: float = 1.0) -> bytes:
    """A near-duplicate of an image: re-encoded (and optionally resized); other pixels, close pHash."""
    import io

    from PIL import Image

    img = Image.open(io.BytesIO(data)).convert("RGB")
    if scale != 1.0:
        img = img.resize((int(img.width * scale), int(img.height * scale)))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=quality)
    return out.getvalue()


def as_png(data: bytes) -> bytes:
    """The same decoded pixels in another container: an exact pixel duplicate."""
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.open(io.BytesIO(data)).save(out, format="PNG")
    return out.getvalue()


def items_import(project: Project, folder, rows: list[dict]) -> list[Item]:
    """Import rows {source_id, data (image bytes), text, redistributable?, ext?} in order."""
    manifest, files = [], {}
    for r in rows:
        name = f"{r['source_id']}.{r.get('ext', 'jpg')}"
        files[name] = r["data"]
        manifest.append(
            {
                "image": name,
                "text": r["text"],
                "source_id": r["source_id"],
                "source_dataset": "test",
                "redistributable": r.get("redistributable", False),
            }
        )
    job = import_job_run(
        job=import_job_create(project=project, user=None, source_name="test"),
        path=source_write(folder, manifest, files),
    )
    assert not job.errors, job.errors
    by_sid = {
        i.source_id: i for i in Item.objects.filter(project=project, source_id__in=[r["source_id"] for r in rows])
    }
    return [by_sid[r["source_id"]] for r in rows]
