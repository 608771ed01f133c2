from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.management import call_command
from PIL import Image

from projects.factories import image_bytes, source_write
from projects.imports import import_job_create, import_job_run
from projects.models import ImportJob, Item

pytestmark = pytest.mark.django_db


def run_import(project, path):
    return import_job_run(job=import_job_create(project=project, user=None, source_name=str(path)), path=path)


def png_bytes(seed=1, size=(64, 48)):
    return image_bytes(seed, size=size, fmt="PNG")


def test_good_and_bad_rows_each_get_their_outcome(project, tmp_path, settings):
    settings.CONCORD_MAX_IMAGE_BYTES = 200_000
    settings.CONCORD_MAX_IMAGE_PIXELS = 1_000_000
    good = image_bytes(1)
    files = {
        "ok.jpg": good,
        "ok2.png": png_bytes(2),
        "notimage.jpg": b"<html><script>alert(1)</script></html>",
        "truncated.jpg": good[: len(good) // 2],
        "huge.png": png_bytes(3, size=(1200, 1000)),
        "big.bmp": b"BM" + b"\0" * 300_000,
        "image.bmp": (
            lambda: (lambda b: (Image.new("RGB", (8, 8)).save(b, format="BMP"), b.getvalue())[1])(io.BytesIO())
        )(),
    }
    rows = [
        {"image": "ok.jpg", "text": "good one", "source_id": "a"},
        {"image": "ok2.png", "text": "good two", "source_id": "b", "license": "yes", "extra_col": "kept"},
        {"image": "missing.jpg", "text": "x", "source_id": "c"},
        {"image": "notimage.jpg", "text": "x", "source_id": "d"},
        {"image": "truncated.jpg", "text": "x", "source_id": "e"},
        {"image": "huge.png", "text": "x", "source_id": "f"},
        {"image": "big.bmp", "text": "x", "source_id": "g"},
        {"image": "image.bmp", "text": "x", "source_id": "h"},
        {"image": "ok.jpg", "text": "   ", "source_id": "i"},
        {"image": "ok.jpg", "text": "dup id", "source_id": "a"},
        {"image": "../../etc/passwd", "text": "x", "source_id": "j"},
        {"image": "ok.jpg", "text": "bad license", "source_id": "k", "license": "maybe"},
    ]
    job = run_import(project, source_write(tmp_path / "src", rows, files))
    assert job.status == ImportJob.Status.DONE
    assert job.imported == 2
    reasons = {e["source_id"]: e["reason"] for e in job.errors}
    assert reasons["c"] == "missing file missing.jpg"
    assert reasons["d"].startswith("not an image")
    assert reasons["e"].startswith("truncated or corrupt image")
    assert reasons["f"].startswith("image over the pixel limit")
    assert reasons["g"].startswith("file too large")
    assert reasons["h"].startswith("unsupported format BMP")
    assert reasons["i"] == "missing text"
    assert reasons["a"] == "duplicate source id 'a' in this manifest"
    assert "not a relative path inside the upload" in reasons["j"] or "missing file" in reasons["j"]
    assert "license flag" in reasons["k"]
    assert [e["row"] for e in job.errors] == [3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    b = Item.objects.get(project=project, source_id="b")
    assert b.redistributable is True and b.metadata == {"extra_col": "kept"} and b.image.endswith(".png")
    assert (b.width, b.height) == (64, 48)
    assert Item.objects.get(project=project, source_id="a").image_format == "JPEG"


def test_reimport_creates_no_duplicates_and_exact_pixels_are_flagged(project, tmp_path):
    png = png_bytes(7)
    webp = io.BytesIO()
    Image.open(io.BytesIO(png)).save(webp, format="WEBP", lossless=True)
    files = {"a.png": png, "b.webp": webp.getvalue(), "c.jpg": image_bytes(9)}
    rows = [
        {"image": "a.png", "text": "first"},
        {"image": "b.webp", "text": "same pixels, other container"},
        {"image": "c.jpg", "text": "other"},
    ]
    src = source_write(tmp_path / "src", rows, files)
    job = run_import(project, src)
    assert (job.imported, job.exact_duplicates, job.errors) == (3, 1, [])
    first = Item.objects.get(text="first")
    assert Item.objects.get(text="same pixels, other container").duplicate_of == first
    again = run_import(project, src)
    assert (again.imported, again.already_present) == (0, 3)
    assert Item.objects.filter(project=project).count() == 3


def test_csv_manifest_in_a_zip_with_subfolders(project, tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(
            "export/manifest.csv",
            'image,text,source_id,language,redistributable\nimgs/1.jpg,hello,x1,en,no\nimgs/2.jpg,"with, comma",x2,ar,yes\n',
        )
        z.writestr("export/imgs/1.jpg", image_bytes(1))
        z.writestr("export/imgs/2.jpg", image_bytes(2))
        z.writestr("../evil.jpg", image_bytes(3))
    path = tmp_path / "up.zip"
    path.write_bytes(buf.getvalue())
    job = run_import(project, path)
    assert (job.imported, job.errors) == (2, [])
    assert Item.objects.get(source_id="x2").text == "with, comma"
    assert Item.objects.get(source_id="x2").language == "ar"


def test_unusable_sources_fail_with_a_message(project, tmp_path):
    (tmp_path / "empty").mkdir()
    job = run_import(project, tmp_path / "empty")
    assert job.status == ImportJob.Status.FAILED and "no manifest" in job.error
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"PK\x03\x04 not really")
    job = run_import(project, bad)
    assert job.status == ImportJob.Status.FAILED and "zip" in job.error
    src = tmp_path / "badrows"
    src.mkdir()
    (src / "manifest.jsonl").write_text('{"image": "a.jpg", "text": "x"\n[1,2]\n')
    job = run_import(project, src)
    assert job.status == ImportJob.Status.DONE
    assert [e["reason"][:12] for e in job.errors] == ["invalid JSON", "a JSONL row "]


def test_zip_member_declaring_a_huge_size_is_not_read(project, tmp_path, settings):
    settings.CONCORD_MAX_IMAGE_BYTES = 10_000
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.jsonl", json.dumps({"image": "bomb.png", "text": "x"}) + "\n")
        z.writestr("bomb.png", b"\0" * 5_000_000)  # compresses to a few KB
    path = tmp_path / "bomb.zip"
    path.write_bytes(buf.getvalue())
    job = run_import(project, path)
    assert job.errors[0]["reason"].startswith("file too large")


def test_management_command_reports_rows(project, tmp_path, capsys):
    src = source_write(
        tmp_path / "src",
        [{"image": "a.jpg", "text": "t", "source_id": "1"}, {"image": "nope.jpg", "text": "t"}],
        {"a.jpg": image_bytes(1)},
    )
    call_command("import_items", project.slug, str(src))
    out = capsys.readouterr().out
    assert "2 rows: imported 1" in out and "row 2: missing file nope.jpg" in out
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no project"):
        call_command("import_items", "nope", str(src))


def test_exif_rotated_jpeg_is_stored_upright(project, tmp_path):
    img = Image.new("RGB", (40, 20), "red")
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 CW on display
    buf = io.BytesIO()
    img.save(buf, format="JPEG", exif=exif.tobytes())
    src = source_write(tmp_path / "src", [{"image": "r.jpg", "text": "rotated"}], {"r.jpg": buf.getvalue()})
    run_import(project, src)
    item = Item.objects.get(text="rotated")
    assert (item.width, item.height) == (20, 40) and item.image_format == "PNG"


def test_chunks_out_of_order_give_the_same_report_and_links_as_one_pass(project, tmp_path, monkeypatch):
    """Chunks run by different workers in any order: duplicate copies whose chunks did not see
    each other are linked to the earliest copy, counts and problems are the job's totals."""
    from projects import imports
    from projects.models import ImportChunk

    monkeypatch.setattr(imports, "CHUNK_ROWS", 3)
    files = {f"img{i}.jpg": image_bytes(i) for i in range(8)}
    files["copy.jpg"] = image_bytes(0)  # the pixels of img0.jpg
    rows = [{"image": f"img{i}.jpg", "text": f"t{i}", "source_id": f"s{i}"} for i in range(8)]
    rows.insert(1, {"image": "missing.jpg", "text": "x", "source_id": "gone"})
    rows.append({"image": "copy.jpg", "text": "the same picture again", "source_id": "s-copy"})
    rows.append({"image": "img1.jpg", "text": "dup id", "source_id": "s1"})  # refused while reading
    job = import_job_create(project=project, user=None, source_name="x")
    ImportJob.objects.filter(pk=job.pk).update(source_path=str(source_write(tmp_path / "src", rows, files)))
    # Read the manifest into chunks without running them, then run them last-first.
    monkeypatch.setattr(imports, "chunks_to_send", lambda qs: [])
    import_job_run(job=job)
    chunks = list(ImportChunk.objects.filter(job=job).order_by("-number"))
    assert [c.rows for c in reversed(chunks)] == [3, 3, 3, 1]
    for chunk in chunks:
        imports.import_chunk_run(chunk_id=chunk.pk)
    job.refresh_from_db()
    assert job.status == "done", job.error
    assert (job.imported, job.refused, job.exact_duplicates, job.progress_total) == (9, 2, 1, 11)
    assert [e["row"] for e in job.errors] == [2, 11]
    # The copy imported first (its chunk ran first) is the original; the other points to it.
    copy, first = Item.objects.get(source_id="s-copy"), Item.objects.get(source_id="s0")
    assert copy.pk < first.pk and copy.duplicate_of is None and first.duplicate_of_id == copy.pk
    assert not (tmp_path / "var" / "imports" / f"job-{job.pk}").exists()
    # Two chunks side by side, neither seeing the other's copy: linked when the job ends.
    Item.objects.filter(pk=first.pk).update(duplicate_of=None)
    assert imports._link_exact_duplicates(job) == 1
    assert Item.objects.get(pk=first.pk).duplicate_of_id == copy.pk


def test_an_unreadable_source_mid_manifest_fails_the_job_and_keeps_what_was_read(project, tmp_path, monkeypatch):
    from projects.sources import ImportSource, SourceError

    real_rows = ImportSource.rows

    def breaking(self, limits):
        for i, row in enumerate(real_rows(self, limits)):
            if i == 2:
                raise SourceError("the manifest is corrupt at line 3")
            yield row

    monkeypatch.setattr(ImportSource, "rows", breaking)
    rows = [{"image": f"img{i}.jpg", "text": f"t{i}", "source_id": f"s{i}"} for i in range(4)]
    job = run_import(project, source_write(tmp_path / "src", rows, {f"img{i}.jpg": image_bytes(i) for i in range(4)}))
    assert job.status == "failed" and "corrupt at line 3" in job.error and job.imported == 2
