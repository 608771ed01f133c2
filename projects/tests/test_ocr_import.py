"""OCR on import and text-free variants (projects.ocr): the MemeCap protocol's first round
writes the literal caption on the image with its text painted out (memecap.txt section 3.2)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from django.urls import reverse
from PIL import Image

from annotation.factories import claim, items_open, ready
from annotation.selectors import workspace_for_annotator
from lib.tests.test_ocr import LATIN_FONT, make_meme
from projects.factories import image_bytes, project_with_members, source_write
from projects.imports import import_job_create, import_job_run
from projects.models import Item, ItemOcr, ItemVariant, OcrJob
from projects.ocr import ocr_job_run, ocr_job_start

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(LATIN_FONT is None, reason="no TrueType font (apt-get install fonts-dejavu-core)"),
]

CAPTIONS = [("WHEN THE CODE WORKS", "ON THE FIRST TRY"), ("ME AFTER", "ONE MORE COFFEE")]


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def memes():
    return [make_meme("astronaut", top, bottom) for top, bottom in CAPTIONS]


def _import(project, folder, memes, *, texts):
    rows, files = [], {}
    for i, (meme, text) in enumerate(zip(memes, texts, strict=True)):
        files[f"m{i}.png"] = _png(meme.image)
        row = {"image": f"m{i}.png", "source_id": f"m{i}"}
        if text is not None:
            row["text"] = text
        rows.append(row)
    job = import_job_run(
        job=import_job_create(project=project, user=None, source_name="t"), path=source_write(folder, rows, files)
    )
    return job, {it.source_id: it for it in Item.objects.filter(project=project)}


def test_memecap_import_reads_the_images_paints_them_and_fills_missing_text(
    lead, tmp_path, memes, django_capture_on_commit_callbacks
):
    project = project_with_members("mc", preset="memecap", lead=[lead])
    assert project.ocr_on_import
    with django_capture_on_commit_callbacks(execute=True):  # the OCR task runs eagerly on commit
        job, items = _import(project, tmp_path / "src", memes, texts=["given by the manifest", None])
    assert (job.imported, job.refused) == (2, 0)  # the row without text is kept ...
    items = {it.source_id: it for it in Item.objects.filter(project=project)}
    ocr_job = OcrJob.objects.get(project=project)  # ... and the import's end queued the OCR run
    assert ocr_job.status == "done" and (ocr_job.items_read, ocr_job.texts_filled, ocr_job.unreadable) == (2, 1, 0)
    given, filled = items["m0"], items["m1"]
    assert (given.text, given.text_from_ocr) == ("given by the manifest", False)
    assert filled.text_from_ocr and "COFFEE" in filled.text.upper()
    lines = ItemOcr.objects.get(item=given).lines
    assert any("CODE" in line["text"].upper() for line in lines)
    assert all(len(line["box"]) == 4 and min(line["box"]) >= 0 and max(line["box"]) <= 1000 for line in lines)
    # The text-free variant: the caption pixels changed, the rest of the picture did not.
    variant = ItemVariant.objects.get(item=given, kind="textfree")
    assert (variant.width, variant.height, variant.source) == (given.width, given.height, "inpainted")
    from projects.imaging import image_path

    painted = np.asarray(Image.open(image_path(variant.image)).convert("RGB"), dtype=np.int16)
    original = np.asarray(memes[0].image.convert("RGB"), dtype=np.int16)
    background = np.asarray(memes[0].background.convert("RGB"), dtype=np.int16)
    x1, y1, x2, y2 = memes[0].captions[0][1]
    region = (slice(y1, y2), slice(x1, x2))
    assert np.abs(painted[region] - original[region]).mean() > 20  # the white letters are gone
    assert (
        np.abs(painted[region] - background[region]).mean() < np.abs(original[region] - background[region]).mean() / 2
    )
    assert np.abs(painted[250:300, 100:400] - original[250:300, 100:400]).mean() < 2  # the middle is untouched
    # Running OCR again reads nothing twice.
    again = ocr_job_run(job_id=ocr_job_start(project=project, enqueue=False).pk)
    assert again.items_read == 0 and ItemOcr.objects.filter(item__project=project).count() == 2


def test_without_ocr_a_row_without_text_is_refused_as_before(lead, tmp_path, memes):
    project = project_with_members("p1", preset="meme3w", lead=[lead])
    job, items = _import(project, tmp_path / "src", memes, texts=["a text", None])
    assert (job.imported, job.refused) == (1, 1) and job.error_counts == {"missing_text": 1}
    assert not OcrJob.objects.filter(project=project).exists()


def test_an_unreadable_image_is_counted_not_a_failed_job(lead, tmp_path, memes):
    project = project_with_members("mc", preset="memecap", lead=[lead])
    project.ocr_on_import = False
    project.save(update_fields=["ocr_on_import"])
    _, items = _import(project, tmp_path / "src", memes, texts=["a", "b"])
    from projects.imaging import image_path

    image_path(items["m1"].image).write_bytes(b"not an image any more")
    job = ocr_job_run(job_id=ocr_job_start(project=project, enqueue=False).pk)
    assert job.status == "done" and (job.items_read, job.unreadable) == (2, 1)
    assert ItemOcr.objects.get(item=items["m1"]).error
    assert not ItemVariant.objects.filter(item=items["m1"]).exists()


def test_a_lead_uploads_their_own_variant_same_size_only(lead, tmp_path, memes, client):
    project = project_with_members("mc", preset="memecap", lead=[lead])
    _, items = _import(project, tmp_path / "src", memes, texts=["a", "b"])
    item = items["m0"]
    client.force_login(lead)
    url = reverse("variant_upload", args=[project.slug])
    wrong = io.BytesIO(image_bytes(1, size=(100, 80), fmt="PNG"))
    wrong.name = "small.png"
    r = client.post(url, {"item": item.pk, "file": wrong})
    assert r.status_code == 400 and "100×80" in r.content.decode()
    garbage = io.BytesIO(b"<html>not an image</html>")
    garbage.name = "x.png"
    r = client.post(url, {"item": item.pk, "file": garbage})
    assert r.status_code == 400 and "refused" in r.content.decode()
    r = client.post(url, {"item": 999999, "file": io.BytesIO(b"")})
    assert r.status_code == 400
    own = io.BytesIO(_png(memes[0].background))
    own.name = "own.png"
    r = client.post(url, {"item": item.pk, "file": own})
    assert r.status_code == 302
    variant = ItemVariant.objects.get(item=item, kind="textfree")
    assert variant.source == "uploaded" and variant.created_by == lead
    # REST: the same rule.
    api = reverse("api_item_variant", args=[project.slug, item.pk, "textfree"])

    def put(data: bytes):
        f = io.BytesIO(data)
        f.name = "v.png"
        return client.post(api, {"file": f})

    r = put(image_bytes(1, size=(100, 80), fmt="PNG"))
    assert r.status_code == 400 and "100×80" in r.json()["detail"]
    r = put(_png(memes[0].background))
    assert r.status_code == 200 and r.json()["source"] == "uploaded"


def test_variant_is_served_under_the_image_rule_and_the_round_shows_it(
    lead, annotator_a, annotator_b, outsider, tmp_path, memes, client, django_capture_on_commit_callbacks
):
    project = project_with_members("mc", preset="memecap", lead=[lead], annotator=[annotator_a, annotator_b])
    with django_capture_on_commit_callbacks(execute=True):
        _, items = _import(project, tmp_path / "src", memes, texts=["a", "b"])
    for u in (annotator_a, annotator_b):
        ready(u, project)
    items_open(list(items.values()))
    mine = claim(annotator_a, project)
    ws = workspace_for_annotator(annotation=mine, audit=False)
    assert ws.image_variant == "textfree" and ws.has_variant and not ws.variant_missing
    assert ws.ocr_lines == []  # round 1 hides the meme's text: no OCR boxes either
    url = reverse("item_image_variant", args=[project.slug, mine.item_id, "textfree"])
    client.force_login(annotator_a)
    page = client.get(reverse("annotate_item", args=[project.slug, mine.item_id])).content.decode()
    assert url in page and 'id="ocr-toggle"' not in page
    r = client.get(url)
    assert r.status_code == 200 and r["Content-Type"] == "image/png"
    assert client.get(reverse("item_image_variant", args=[project.slug, mine.item_id, "nosuch"])).status_code == 404
    other = next(it for it in items.values() if it.pk != mine.item_id)
    assert client.get(reverse("item_image_variant", args=[project.slug, other.pk, "textfree"])).status_code == 403
    client.force_login(outsider)
    assert client.get(url).status_code == 404
    client.force_login(lead)
    assert client.get(url).status_code == 200
    assert client.get(reverse("api_ocr", args=[project.slug])).json()["variants"] == 2
    client.force_login(annotator_a)
    assert client.get(reverse("api_ocr", args=[project.slug])).status_code == 403
    assert client.post(reverse("ocr_start", args=[project.slug])).status_code == 403


def test_a_round_that_shows_text_offers_the_ocr_boxes(
    lead, annotator_a, tmp_path, memes, client, django_capture_on_commit_callbacks
):
    project = project_with_members("p1", preset="meme3w", lead=[lead], annotator=[annotator_a])
    project.ocr_on_import = True
    project.save(update_fields=["ocr_on_import"])
    with django_capture_on_commit_callbacks(execute=True):
        _, items = _import(project, tmp_path / "src", memes, texts=["a", "b"])
    ready(annotator_a, project)
    items_open(list(items.values()))
    mine = claim(annotator_a, project)
    ws = workspace_for_annotator(annotation=mine, audit=False)
    assert ws.image_variant == "original" and ws.ocr_lines
    assert all(set(line) == {"text", "x", "y", "w", "h"} for line in ws.ocr_lines)
    client.force_login(annotator_a)
    page = client.get(reverse("annotate_item", args=[project.slug, mine.item_id])).content.decode()
    assert 'id="ocr-toggle"' in page and 'class="ocr-box"' in page
    assert reverse("item_image", args=[project.slug, mine.item_id]) + '"' in page
