"""Hostile-upload corpus against the import path (projects/sources.py, projects/imaging.py,
projects/services.import_job_run, run as the worker runs it: projects.tasks.import_job_task).

Every file is generated here, in tmp_path (no binary is committed), packed as the zip a lead
would upload, and imported in a subprocess of its own (tests/security/import_runner.py) on a
scratch copy of a migrated database, so that its peak resident set size can be read and a
crash cannot take the test run down. For each: the import must finish (done, or failed with
a message), refuse the hostile row or file with a clear reason, import exactly the good rows,
store nothing outside the media root, and stay under PEAK_RSS_MB.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.conf import settings

from projects.factories import image_bytes

REPO = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("import_runner.py")
#: Peak RSS of the importing process, baseline included (Django + NumPy + Pillow: about 90 MB).
#: The pixel limit (40 MP) allows ~120 MB per decoded RGB image, held a few times over.
PEAK_RSS_MB = 500
#: Address-space cap of the importing process: a safety net for the machine running the tests
#: (an unbounded import dies with MemoryError here instead of taking gigabytes). Its baseline
#: address space is ~500 MB of which ~150 MB resident.
ADDRESS_SPACE_MB = 1280
#: A job still running after this is reported as one that never ends (not a timing assertion:
#: a healthy import of this corpus takes seconds).
JOB_TIMEOUT_S = 300
MB = 1024 * 1024


@dataclass
class Upload:
    path: Path
    imported: set[str]  # source ids that must be imported, and nothing else
    #: source id (or manifest row number) -> words its refusal reason must contain
    row_reasons: dict[object, str] = field(default_factory=dict)
    #: when the whole file is refused: words the job's message must contain
    job_message: str | None = None


# ----------------------------------------------------------------------------------- builders


def _zip(path: Path, members: dict[str, bytes], rows: list[dict] | None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        if rows is not None:
            zf.writestr("manifest.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name), data, zipfile.ZIP_DEFLATED)
    return path


def _zip_streamed(path: Path, name: str, chunk: bytes, total: int, extra: dict[str, bytes] | None = None) -> Path:
    """A zip whose member ``name`` is ``total`` bytes of ``chunk`` repeated, written in pieces."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open(name, "w", force_zip64=True) as fh:
            block = chunk * (MB // len(chunk))
            for _ in range(total // len(block)):
                fh.write(block)
        for n, data in (extra or {}).items():
            zf.writestr(n, data)
    return path


def _row(sid: str, image: str, **extra) -> dict:
    return {"image": image, "text": f"Zorg meme {sid}", "source_id": sid, **extra}


GOOD = "good.jpg"


def _good() -> tuple[dict, dict[str, bytes]]:
    return _row("good", GOOD), {GOOD: image_bytes(7)}


def _png(width: int, height: int, *, rows: int | None = None) -> bytes:
    """A black RGB PNG of width x height; the pixel data is streamed through zlib (a header can
    claim any size: ``rows`` limits how many rows are actually encoded)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    comp = zlib.compressobj(6)
    line = b"\x00" + b"\x00" * (width * 3)
    body = b"".join(comp.compress(line) for _ in range(height if rows is None else rows)) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def _gif() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("P", (40, 30), 3).save(buf, format="GIF")
    return buf.getvalue()


def _deflated(chunk: bytes, total: int) -> tuple[bytes, int]:
    """(raw deflate stream, crc32) of ``total`` bytes of ``chunk`` repeated, built piecewise."""
    comp, crc, out = zlib.compressobj(6, zlib.DEFLATED, -15), 0, []
    block = chunk * (MB // len(chunk))
    for _ in range(total // len(block)):
        out.append(comp.compress(block))
        crc = zlib.crc32(block, crc)
    out.append(comp.flush())
    return b"".join(out), crc


def _raw_zip(path: Path, entries: list[tuple[str, bytes, int, int]]) -> Path:
    """A zip written by hand: (name, deflate stream, crc32, declared uncompressed size) per
    member, so that a member can declare a size its stream does not have."""
    with open(path, "wb") as out:
        central = []
        for name, body, crc, size in entries:
            offset, raw = out.tell(), name.encode()
            out.write(
                struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(body), size, len(raw), 0) + raw + body
            )
            central.append(
                struct.pack(
                    "<IHHHHHHIIIHHHHHII",
                    0x02014B50,
                    20,
                    20,
                    0,
                    8,
                    0,
                    0,
                    crc,
                    len(body),
                    size,
                    len(raw),
                    0,
                    0,
                    0,
                    0,
                    0,
                    offset,
                )
                + raw
            )
        start = out.tell()
        out.write(b"".join(central))
        out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), out.tell() - start, start, 0))
    return path


def _member(name: str, data: bytes) -> tuple[str, bytes, int, int]:
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    return name, comp.compress(data) + comp.flush(), zlib.crc32(data), len(data)


def _bomb_zip(path: Path, *, declared: int) -> Path:
    good_row, good_files = _good()
    rows = [_row("bomb", "bomb.jpg"), good_row]
    body, crc = _deflated(b"\0", 64 * MB)
    return _raw_zip(
        path,
        [
            _member("manifest.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode()),
            *(_member(n, d) for n, d in good_files.items()),
            ("bomb.jpg", body, crc, declared),
        ],
    )


def zip_bomb(tmp: Path) -> Upload:
    """A member that inflates to 64 MB of zeros (the image limit is 20 MB), 64 KB in the zip."""
    return Upload(_bomb_zip(tmp / "bomb.zip", declared=64 * MB), {"good"}, {"bomb": "too large"})


def zip_member_lying_about_its_size(tmp: Path) -> Upload:
    """The same member, but its headers say 1 KB: reading stops there and the CRC cannot match."""
    return Upload(_bomb_zip(tmp / "liar.zip", declared=1024), {"good"}, {"bomb": "bomb.jpg"})


def path_traversal(tmp: Path) -> Upload:
    good_row, good_files = _good()
    evil = image_bytes(8)
    rows = [
        _row("up", "../evil.jpg"),
        _row("abs", "/etc/passwd"),
        _row("deep", "ok/../../evil.jpg"),
        _row("win", "..\\evil.jpg"),
        good_row,
    ]
    path = _zip(tmp / "traversal.zip", {"../evil.jpg": evil, "/abs.jpg": evil, **good_files}, rows)
    why = "not a relative path inside the upload"
    return Upload(path, {"good"}, {"up": why, "abs": why, "deep": why, "win": why})


def decompression_bomb_png(tmp: Path) -> Upload:
    """Headers claiming 60000 x 60000 pixels (3.6 GP) over a few bytes of data, and an honest
    image just under the 40 MP limit (decoded: ~120 MB), which must be imported within the
    memory bound."""
    good_row, good_files = _good()
    rows = [_row("bomb", "bomb.png"), _row("big", "big.png"), good_row]
    path = _zip(
        tmp / "pngbomb.zip", {"bomb.png": _png(60000, 60000, rows=4), "big.png": _png(6300, 6300), **good_files}, rows
    )
    return Upload(path, {"good", "big"}, {"bomb": "pixel limit"})


def truncated_jpeg(tmp: Path) -> Upload:
    good_row, good_files = _good()
    data = image_bytes(9, size=(640, 480))
    path = _zip(
        tmp / "truncated.zip", {"cut.jpg": data[: len(data) // 2], **good_files}, [_row("cut", "cut.jpg"), good_row]
    )
    return Upload(path, {"good"}, {"cut": "truncated"})


def script_images(tmp: Path) -> Upload:
    """An SVG with a script (as .svg and renamed .jpg) and HTML renamed .jpg."""
    good_row, good_files = _good()
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.domain)</script></svg>'
    html = b"<!doctype html><html><body><script>alert(document.cookie)</script></body></html>"
    rows = [_row("svg", "x.svg"), _row("svgjpg", "x.jpg"), _row("html", "page.jpg"), good_row]
    path = _zip(tmp / "scripts.zip", {"x.svg": svg, "x.jpg": svg, "page.jpg": html, **good_files}, rows)
    why = "not an image"
    return Upload(path, {"good"}, {"svg": why, "svgjpg": why, "html": why})


def polyglots(tmp: Path) -> Upload:
    """A JPEG with a zip archive appended (both readers accept it) and a GIF followed by script."""
    good_row, good_files = _good()
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zf:
        zf.writestr("payload.html", "<script>alert(1)</script>")
    jpeg_zip = image_bytes(10) + inner.getvalue()
    gif_js = _gif() + b"\n/*\x00*/=alert(document.domain);//"
    rows = [_row("jpgzip", "poly.jpg"), _row("gifjs", "poly.gif"), good_row]
    path = _zip(tmp / "polyglot.zip", {"poly.jpg": jpeg_zip, "poly.gif": gif_js, **good_files}, rows)
    why = "after the end of the image"
    return Upload(path, {"good"}, {"jpgzip": why, "gifjs": why})


def empty_member(tmp: Path) -> Upload:
    good_row, good_files = _good()
    path = _zip(tmp / "empty-member.zip", {"empty.jpg": b"", **good_files}, [_row("empty", "empty.jpg"), good_row])
    return Upload(path, {"good"}, {"empty": "empty file"})


def empty_upload(tmp: Path) -> Upload:
    path = tmp / "empty.zip"
    path.write_bytes(b"")
    return Upload(path, set(), job_message="neither a folder nor a readable zip file")


def non_utf8_manifest(tmp: Path) -> Upload:
    path = tmp / "latin1.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.jsonl", '{"image": "good.jpg", "text": "café", "source_id": "x"}\n'.encode("latin-1"))
        zf.writestr(GOOD, image_bytes(7))
    return Upload(path, set(), {1: "not UTF-8"})


def rows_100k(tmp: Path) -> Upload:
    """100,000 rows naming images that are not in the upload, and one good row."""
    good_row, good_files = _good()
    rows = [{"image": f"missing/{i}.jpg", "text": "Zorg"} for i in range(100_000)] + [good_row]
    path = _zip(tmp / "rows100k.zip", good_files, rows)
    return Upload(path, {"good"}, {1: "missing file"})


def manifest_over_limit(tmp: Path) -> Upload:
    """A manifest that inflates to 210 MB in one line: streamed, the line is refused for its length."""
    path = _zip_streamed(tmp / "bigmanifest.zip", "manifest.jsonl", b"a", 210 * MB, {GOOD: image_bytes(7)})
    return Upload(path, set(), {1: "longer than"})


def manifest_of_tiny_rows(tmp: Path) -> Upload:
    """One million rows of ``{}`` (3 MB; 3 KB in the zip): each is refused (no image path)."""
    path = tmp / "tiny-rows.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.jsonl", b"{}\n" * 1_000_000)
    return Upload(path, set(), {1: "missing image path"})


def manifest_bomb(tmp: Path) -> Upload:
    """A manifest within the 200 MB limit that is nothing but 150 MB of newlines."""
    path = _zip_streamed(tmp / "newlines.zip", "manifest.jsonl", b"\n", 150 * MB)
    return Upload(path, set())


CORPUS = {
    "zip_bomb": zip_bomb,
    "zip_member_lying_about_its_size": zip_member_lying_about_its_size,
    "path_traversal": path_traversal,
    "decompression_bomb_png": decompression_bomb_png,
    "truncated_jpeg": truncated_jpeg,
    "svg_and_html_with_script": script_images,
    "polyglot_jpeg_zip_and_gif_js": polyglots,
    "empty_image_file": empty_member,
    "empty_upload": empty_upload,
    "non_utf8_manifest": non_utf8_manifest,
    "manifest_100k_rows": rows_100k,
    "manifest_over_the_size_limit": manifest_over_limit,
    "manifest_of_150_mb_newlines": manifest_bomb,
    "manifest_of_a_million_tiny_rows": manifest_of_tiny_rows,
}


# ----------------------------------------------------------------------------------- runner


@pytest.fixture(scope="session")
def migrated_db(tmp_path_factory) -> Path:
    """A migrated SQLite database the subprocesses copy (migrating once costs ~5 s)."""
    folder = tmp_path_factory.mktemp("hostile-template")
    db = folder / "template.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{db}",
        "CONCORD_VAR_DIR": str(folder / "var"),
        "PYTHONPATH": str(REPO),
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True, timeout=300)
    return db


def run_import(upload: Path, *, db_template: Path, work: Path) -> dict:
    db = work / "db.sqlite3"
    shutil.copy(db_template, db)
    var = work / "var"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{db}",
        "CONCORD_VAR_DIR": str(var),
        "PYTHONPATH": str(REPO),
        "CELERY_TASK_ALWAYS_EAGER": "1",
        "REDIS_URL": "",
        "IMPORT_RUNNER_ADDRESS_SPACE_MB": str(ADDRESS_SPACE_MB),
    }
    try:
        done = subprocess.run(
            [sys.executable, str(RUNNER), str(upload)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=JOB_TIMEOUT_S,
            check=False,
        )  # the return code is asserted below
    except subprocess.TimeoutExpired:
        pytest.fail(f"the import of {upload.name} was still running after {JOB_TIMEOUT_S} s")
    assert done.returncode == 0, f"the import process died ({done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


#: Found by this corpus, not fixed here: the import job and its manifest reader are being
#: rewritten with the job mechanism (see the report of the security branch). Strict: when
#: the rewrite lands these pass, and the marker must go.
#: Known defects, as strict xfails (none left: the streamed import refuses each of them per row).
XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("name", list(CORPUS))
def test_hostile_upload_is_refused_with_a_reason_and_bounded_memory(name, tmp_path, migrated_db, request):
    if name in XFAIL:
        request.applymarker(pytest.mark.xfail(strict=True, reason=XFAIL[name]))
    upload = CORPUS[name](tmp_path)
    outside = set(tmp_path.parent.rglob("evil*"))
    report = run_import(upload.path, db_template=migrated_db, work=tmp_path)
    summary = {k: report[k] for k in ("status", "message", "imported", "error_count", "crashed", "peak_mb")}

    assert report["crashed"] is None, summary
    assert report["peak_mb"] <= PEAK_RSS_MB, f"peak RSS {report['peak_mb']} MB > {PEAK_RSS_MB} MB: {summary}"
    assert set(report["items"]) == upload.imported, summary
    if upload.job_message is not None:
        assert report["status"] == "failed" and upload.job_message in report["message"], summary
    else:
        assert report["status"] == "done", summary
    by_key = {}
    for e in report["errors"]:
        by_key[e.get("source_id") or e["row"]] = e["reason"]
    for key, words in upload.row_reasons.items():
        assert key in by_key, (key, report["errors"][:5], summary)
        assert words in by_key[key], (key, by_key[key])
        assert "unexpected error" not in by_key[key], (key, by_key[key])
    # Only content-addressed images under the media root; nothing escaped the upload.
    assert all(f.startswith("images/") for f in report["stored_files"]), report["stored_files"]
    assert set(tmp_path.parent.rglob("evil*")) == outside
    assert len(report["stored_files"]) == len(upload.imported)
    assert settings.CONCORD_MAX_IMAGE_PIXELS == 40_000_000  # the corpus is sized for the default limits
