"""Read an import source: a folder or a zip holding images and a JSONL or CSV manifest.

Each manifest row names its image by a relative path. Paths are resolved inside the source
only (no absolute paths, no ``..``, no symlink leaving the folder), and a zip member is read
only after its declared size passed the file limit (zip bombs).
"""
from __future__ import annotations

import csv
import io
import json
import posixpath
import zipfile
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

MANIFEST_NAMES = ("manifest.jsonl", "manifest.csv", "items.jsonl", "items.csv")
MAX_MANIFEST_BYTES = 200 * 1024**2


class SourceError(ValueError):
    """The whole source is unusable (no manifest, not a zip, unreadable manifest)."""


class MissingFile(ValueError):
    pass


class ImportSource:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._zip: zipfile.ZipFile | None = None
        if self.path.is_dir():
            self.root = self.path.resolve()
        elif self.path.is_file():
            try:
                self._zip = zipfile.ZipFile(self.path)
            except (zipfile.BadZipFile, OSError) as exc:
                raise SourceError(f"{self.path.name} is neither a folder nor a readable zip file ({exc})") from None
            self._members = {self._clean(i.filename): i for i in self._zip.infolist() if not i.is_dir()}
            self._members.pop(None, None)
        else:
            raise SourceError(f"{path} does not exist")
        self.manifest_name = self._find_manifest()

    @staticmethod
    def _clean(name: str) -> str | None:
        name = name.replace("\\", "/")
        if name.startswith("/") or name.startswith("__MACOSX/"):
            return None
        norm = posixpath.normpath(name)
        if norm.startswith("../") or norm == ".." or norm == ".":
            return None
        return norm

    def _names(self) -> list[str]:
        if self._zip is not None:
            return list(self._members)
        return [p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file()]

    def _find_manifest(self) -> str:
        names = self._names()
        for wanted in MANIFEST_NAMES:
            for n in sorted(names, key=lambda s: s.count("/")):
                if posixpath.basename(n) == wanted:
                    return n
        top = [n for n in names if n.count("/") <= 1 and n.rsplit(".", 1)[-1].lower() in ("jsonl", "csv")]
        if len(top) == 1:
            return top[0]
        raise SourceError(
            "no manifest found: add manifest.jsonl or manifest.csv (one row per item with "
            "image, text and optional title, source_dataset, source_id, language, domain, license)"
        )

    def read(self, rel: str, *, limit: int | None = None) -> bytes:
        """Bytes of a file named relative to the manifest's folder; MissingFile when absent."""
        limit = limit or settings.CONCORD_MAX_IMAGE_BYTES
        base = posixpath.dirname(self.manifest_name)
        clean = self._clean(posixpath.join(base, rel)) if isinstance(rel, str) and rel.strip() else None
        if clean is None:
            raise MissingFile(f"image path {rel!r} is not a relative path inside the upload")
        if self._zip is not None:
            info = self._members.get(clean)
            if info is None:
                raise MissingFile(f"missing file {rel}")
            if info.file_size > limit:
                raise MissingFile(f"file too large ({info.file_size:,} bytes; limit {limit:,})")
            with self._zip.open(info) as fh:
                data = fh.read(limit + 1)
        else:
            path = (self.root / clean).resolve()
            if self.root not in path.parents or not path.is_file():
                raise MissingFile(f"missing file {rel}")
            if path.stat().st_size > limit:
                raise MissingFile(f"file too large ({path.stat().st_size:,} bytes; limit {limit:,})")
            data = path.read_bytes()
        if len(data) > limit:
            raise MissingFile(f"file too large (more than {limit:,} bytes)")
        return data

    def rows(self) -> Iterator[tuple[int, dict | None, str | None]]:
        """Yield (row number, row dict or None, error) for every manifest row."""
        raw = self.read(self.manifest_name.rsplit("/", 1)[-1], limit=MAX_MANIFEST_BYTES)
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise SourceError(f"{self.manifest_name} is not UTF-8 text") from None
        if self.manifest_name.lower().endswith(".csv"):
            reader = csv.DictReader(io.StringIO(text))
            if not reader.fieldnames or "image" not in reader.fieldnames:
                raise SourceError(f"{self.manifest_name}: the CSV header must have an 'image' column")
            for i, row in enumerate(reader, start=2):  # row 1 is the header
                if None in row:
                    yield i, None, "row has more cells than the header"
                    continue
                yield i, {k: v for k, v in row.items() if k is not None}, None
        else:
            for i, line in enumerate(text.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield i, None, f"invalid JSON ({exc.msg} at column {exc.colno})"
                    continue
                if not isinstance(row, dict):
                    yield i, None, "a JSONL row must be an object"
                    continue
                yield i, row, None

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
