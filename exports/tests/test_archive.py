"""The one-archive download (issue 16): a stored zip streamed from the release's files,
deterministic (sha256 = ETag, in the API), resumable with Range, holding exactly the release's
files and redistributable images; Zip64 beyond the classic limits."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pyarrow.parquet as pq
import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from exports.archive import ARCHIVE_INDEX, ArchiveLayout, archive_index_write
from exports.models import Release
from exports.selectors import release_dir
from exports.services import export_job_run, export_job_start

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


@pytest.fixture
def release(project, dup_gold, lead) -> Release:
    job = export_job_start(project=project, user=lead, enqueue=False)
    return export_job_run(job=job)


def test_archive_holds_every_file_and_only_redistributable_images(release, researcher, dup_gold):
    r = api(researcher).get(f"/api/projects/p1/releases/{release.number}/archive")
    assert r.status_code == 200 and r.streaming and r["Content-Type"] == "application/zip"
    data = body(r)
    assert int(r["Content-Length"]) == len(data) == release.archive_bytes
    assert hashlib.sha256(data).hexdigest() == release.archive_sha256 and r["ETag"] == f'"{release.archive_sha256}"'
    assert 'filename="p1-v1.zip"' in r["Content-Disposition"]
    zf = zipfile.ZipFile(io.BytesIO(data))
    assert zf.testzip() is None  # every CRC-32 right
    root = release_dir(release)
    names = sorted(zf.namelist())
    expected = sorted(
        f"p1-v1/{p.relative_to(root).as_posix()}" for p in root.rglob("*") if p.is_file() and p.name != ARCHIVE_INDEX
    )
    assert names == expected
    for name in [*release.manifest["files"], "manifest.json"]:
        assert zf.read(f"p1-v1/{name}") == (root / name).read_bytes(), name
    images = [n for n in names if n.startswith("p1-v1/images/")]
    shipped = {i.image_sha256 for i in dup_gold if i.redistributable}
    assert images and {n.rsplit("/", 1)[1].split(".")[0] for n in images} == shipped
    assert all(info.compress_type == zipfile.ZIP_STORED for info in zf.infolist())
    detail = api(researcher).get(f"/api/projects/p1/releases/{release.number}/").json()
    assert detail["archive"]["sha256"] == release.archive_sha256 and detail["archive"]["bytes"] == len(data)


def test_archive_ranges_resume_and_conditional_get(release, researcher):
    client = api(researcher)
    url = f"/api/projects/p1/releases/{release.number}/archive"
    whole = body(client.get(url))
    size = len(whole)
    for start, end in [(0, 99), (1000, 5000), (size - 10, size - 1), (size // 2, size - 1)]:
        r = client.get(url, HTTP_RANGE=f"bytes={start}-{end}")
        assert r.status_code == 206 and r["Content-Range"] == f"bytes {start}-{end}/{size}"
        assert body(r) == whole[start : end + 1]
    r = client.get(url, HTTP_RANGE="bytes=-64")
    assert body(r) == whole[-64:]
    assert client.get(url, HTTP_RANGE=f"bytes={size}-").status_code == 416
    assert client.get(url, HTTP_IF_NONE_MATCH=f'"{release.archive_sha256}"').status_code == 304
    # a download resumed in pieces is the archive
    pieces = b"".join(
        body(client.get(url, HTTP_RANGE=f"bytes={a}-{min(a + 4095, size - 1)}")) for a in range(0, size, 4096)
    )
    assert pieces == whole


def test_same_release_same_archive_bytes(release, tmp_path):
    root = release_dir(release)
    a = ArchiveLayout(root)
    b = ArchiveLayout(root)
    assert a.sha256() == b.sha256() and a.size == b.size


def test_zip64_when_entries_exceed_the_classic_limit(tmp_path):
    folder = tmp_path / "many"
    (folder / "images").mkdir(parents=True)
    for i in range(70_000):
        (folder / "images" / f"{i:05d}.txt").write_bytes(b"x" if i % 2 else b"")
    archive_index_write(folder, prefix="many/")
    layout = ArchiveLayout(folder)
    data = b"".join(layout.read())
    assert len(data) == layout.size
    zf = zipfile.ZipFile(io.BytesIO(data))
    assert len(zf.namelist()) == 70_000 and zf.read("many/images/00001.txt") == b"x"


def test_an_image_whose_licence_forbids_redistribution_is_in_no_shipped_byte(release, researcher, dup_gold):
    """Archive, per-split Parquet (image_data), Hub files: none carries a non-redistributable image."""
    from projects.imaging import image_path

    data = body(api(researcher).get(f"/api/projects/p1/releases/{release.number}/archive"))
    root = release_dir(release)
    files = [root / f"records/{s}.parquet" for s in ("train", "val", "test")]
    parquet = b"".join(f.read_bytes() for f in files)  # raw bytes (footer statistics, uncompressed pages)
    # and the decoded column: data pages are compressed, so a byte search alone proves nothing
    embedded = b"\0".join(
        v["bytes"] for f in files for v in pq.read_table(f, columns=["image_data"]).column(0).to_pylist() if v
    )
    withheld = [i for i in dup_gold if not i.redistributable and i.source_id != "s3"]
    shipped = [i for i in dup_gold if i.redistributable]
    assert withheld and shipped
    for item in withheld:
        raw = image_path(item.image).read_bytes()
        assert raw not in data and raw[:4096] not in data, item.source_id
        assert raw[:4096] not in parquet and raw[:4096] not in embedded, item.source_id
    for item in shipped:  # the check can fail: shipped images are found by the same search
        raw = image_path(item.image).read_bytes()
        assert raw in data and raw in embedded, item.source_id


def test_archive_write_hashes_in_one_pass_what_the_layout_serves(tmp_path, monkeypatch):
    import os

    import exports.archive as archive

    folder = tmp_path / "rel"
    (folder / "images").mkdir(parents=True)
    (folder / "records").mkdir()
    (folder / "records.jsonl").write_bytes(b'{"a":1}\n' * 300_000)  # several read blocks
    (folder / "records" / "empty.jsonl").write_bytes(b"")
    (folder / "store.png").write_bytes(os.urandom(5000))
    for i in range(5):  # hard links to one file, as a release's images are
        os.link(folder / "store.png", folder / "images" / f"{i}.png")
    calls = []
    real_crc = archive._crc
    monkeypatch.setattr(archive, "_crc", lambda path: calls.append(path.name) or real_crc(path))
    sha, size = archive.archive_write(folder, prefix="p-v1/", when=None)
    assert calls == ["0.png", "records.jsonl", "empty.jsonl"]  # each inode once, in archive order
    index = (folder / ARCHIVE_INDEX).read_bytes()
    layout = ArchiveLayout(folder)
    data = b"".join(layout.read())
    assert (sha, size) == (hashlib.sha256(data).hexdigest(), len(data)) == (layout.sha256(), layout.size)
    archive_index_write(folder, prefix="p-v1/")  # the index the two-pass way: the same bytes
    assert (folder / ARCHIVE_INDEX).read_bytes() == index
    zf = zipfile.ZipFile(io.BytesIO(data))
    assert zf.testzip() is None and len(zf.namelist()) == 8
    assert zf.read("p-v1/images/3.png") == (folder / "store.png").read_bytes()


def test_archive_write_stops_at_a_file_that_cannot_be_read(tmp_path, monkeypatch):
    import exports.archive as archive

    folder = tmp_path / "rel"
    folder.mkdir()
    for name in "abc":
        (folder / f"{name}.txt").write_bytes(name.encode() * 10)

    real = archive._Crcs.of

    def of(self, path):
        if path.name == "b.txt":
            raise PermissionError(f"{path}: denied")
        return real(self, path)

    monkeypatch.setattr(archive._Crcs, "of", of)
    with pytest.raises(PermissionError, match="denied"):
        archive.archive_write(folder, prefix="x/")
    assert not (folder / ARCHIVE_INDEX).exists()  # no index of an archive that was not hashed
