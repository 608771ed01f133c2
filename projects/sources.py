"""Read an import source: a folder or a zip holding images and a JSONL or CSV manifest.

Uploads are hostile until proven otherwise:

- image paths are resolved inside the source only (no absolute paths, no ``..``, no symlink
  leaving the folder), and a zip member is read only after its declared size passed the file
  limit (zip bombs);
- the manifest is **streamed** row by row, never read whole: a 676 KB zip may inflate to a
  190 MB manifest of millions of rows. Each row is bounded (bytes, JSON nesting depth) and
  refused on its own with a reason; reading stops after ``max_rows`` rows, and the rest is
  reported once.
"""

from __future__ import annotations

import csv
import json
import posixpath
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings

from core.parsers import depth_within

MANIFEST_NAMES = ("manifest.jsonl", "manifest.csv", "items.jsonl", "items.csv")
#: Nesting depth of a row (a row is an object; "metadata" may hold objects and lists).
MAX_ROW_DEPTH = 16
_READ_BLOCK = 1 << 20


class SourceError(ValueError):
    """The whole source is unusable (no manifest, not a zip, unreadable manifest)."""


class MissingFile(ValueError):
    pass


@dataclass(frozen=True)
class Problem:
    """Why a row was refused: ``kind`` groups rows in the report, ``reason`` names the problem."""

    kind: str
    reason: str


@dataclass(frozen=True)
class Row:
    number: int  # line number in the manifest (CSV: the header is line 1)
    data: dict | None
    problem: Problem | None = None


@dataclass(frozen=True)
class Limits:
    max_rows: int
    max_row_bytes: int

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(max_rows=settings.CONCORD_IMPORT_MAX_ROWS, max_row_bytes=settings.CONCORD_IMPORT_MAX_ROW_BYTES)


def _bounded_lines(stream: IO[bytes], max_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """(line number, line) for every non-blank physical line of a binary stream, read in 1 MB
    blocks; a line longer than ``max_bytes`` is skipped (never held whole) and given as None.
    A block of nothing but whitespace (a manifest of a million newlines) costs one scan."""
    number = 0  # lines finished so far
    pending = b""
    overlong = False
    while True:
        block = stream.read(_READ_BLOCK)
        if not block:
            break
        if not pending and not overlong and not block.strip():
            number += block.count(b"\n")
            continue
        parts = block.split(b"\n")
        for k, part in enumerate(parts[:-1]):
            number += 1
            if k == 0:
                if overlong:
                    overlong = False
                    pending = b""
                    yield number, None
                    continue
                part, pending = pending + part, b""
            if len(part) > max_bytes:
                yield number, None
            elif part.strip():
                yield number, part
        tail = parts[-1]
        if len(parts) > 1:
            pending = b""
        if overlong:
            continue
        pending += tail
        if len(pending) > max_bytes:
            overlong, pending = True, b""
    if overlong:
        yield number + 1, None
    elif pending.strip():
        yield number + 1, pending


class ImportSource:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._zip: zipfile.ZipFile | None = None
        if self.path.is_dir():
            self.root = self.path.resolve()
        elif self.path.is_file():
            try:
                self._zip = zipfile.ZipFile(self.path)
            except (zipfile.BadZipFile, OSError, ValueError) as exc:
                raise SourceError(f"{self.path.name} is neither a folder nor a readable zip file ({exc})") from None
            self._members = {self._clean(i.filename): i for i in self._zip.infolist() if not i.is_dir()}
            self._members.pop(None, None)
        else:
            raise SourceError(f"{self.path.name} does not exist")
        self.manifest_name = self._find_manifest()

    def __enter__(self) -> ImportSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @staticmethod
    def _clean(name: str) -> str | None:
        name = name.replace("\\", "/")
        if name.startswith(("/", "__MACOSX/")) or "\x00" in name:
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
            raise MissingFile(f"image path {str(rel)[:200]!r} is not a relative path inside the upload")
        if self._zip is not None:
            info = self._members.get(clean)
            if info is None:
                raise MissingFile(f"missing file {rel[:200]}")
            if info.file_size > limit:
                raise MissingFile(f"file too large ({info.file_size:,} bytes; limit {limit:,})")
            try:
                with self._zip.open(info) as fh:
                    data = fh.read(limit + 1)
            except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
                raise MissingFile(f"unreadable zip member {rel[:200]} ({exc})") from None
        else:
            path = (self.root / clean).resolve()
            if self.root not in path.parents or not path.is_file():
                raise MissingFile(f"missing file {rel[:200]}")
            if path.stat().st_size > limit:
                raise MissingFile(f"file too large ({path.stat().st_size:,} bytes; limit {limit:,})")
            data = path.read_bytes()
        if len(data) > limit:
            raise MissingFile(f"file too large (more than {limit:,} bytes)")
        return data

    def _open_manifest(self) -> IO[bytes]:
        if self._zip is not None:
            try:
                return self._zip.open(self._members[self.manifest_name])
            except (zipfile.BadZipFile, OSError, NotImplementedError) as exc:
                raise SourceError(f"{self.manifest_name} cannot be read from the zip ({exc})") from None
        path = (self.root / self.manifest_name).resolve()
        if self.root not in path.parents:
            raise SourceError(f"{self.manifest_name} lies outside the upload")
        return open(path, "rb")

    def count_rows(self, limits: Limits) -> int:
        """Rows the manifest will yield (for the progress bar): one streaming pass, bounded."""
        n = 0
        with self._open_manifest() as fh:
            for _ in _bounded_lines(fh, limits.max_row_bytes):
                n += 1
                if n > limits.max_rows:
                    break
        is_csv = self.manifest_name.lower().endswith(".csv")
        return max(0, min(n - (1 if is_csv else 0), limits.max_rows))

    def rows(self, limits: Limits) -> Iterator[Row]:
        """Every manifest row, with a Problem instead of data when the row cannot be used."""
        if self.manifest_name.lower().endswith(".csv"):
            yield from self._csv_rows(limits)
        else:
            yield from self._jsonl_rows(limits)

    def _too_many(self, number: int, limits: Limits) -> Row:
        return Row(
            number,
            None,
            Problem(
                "too_many_rows",
                f"the manifest has more than {limits.max_rows:,} rows: "
                "this row and the rest were not read (split the upload)",
            ),
        )

    def _jsonl_rows(self, limits: Limits) -> Iterator[Row]:
        count = 0
        with self._open_manifest() as fh:
            for number, line in _bounded_lines(fh, limits.max_row_bytes):
                count += 1
                if count > limits.max_rows:
                    yield self._too_many(number, limits)
                    return
                if line is None:
                    yield Row(number, None, Problem("row_too_long", f"row longer than {limits.max_row_bytes:,} bytes"))
                    continue
                try:
                    text = line.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError:
                    yield Row(number, None, Problem("not_utf8", "row is not UTF-8 text"))
                    continue
                try:
                    row = json.loads(text)
                except RecursionError:
                    yield Row(number, None, Problem("too_deep", f"row nested deeper than {MAX_ROW_DEPTH} levels"))
                    continue
                except json.JSONDecodeError as exc:
                    yield Row(number, None, Problem("bad_json", f"invalid JSON ({exc.msg} at column {exc.colno})"))
                    continue
                if not isinstance(row, dict):
                    yield Row(number, None, Problem("not_object", "a JSONL row must be an object"))
                    continue
                if not depth_within(row, MAX_ROW_DEPTH):
                    yield Row(number, None, Problem("too_deep", f"row nested deeper than {MAX_ROW_DEPTH} levels"))
                    continue
                yield Row(number, row)

    def _csv_rows(self, limits: Limits) -> Iterator[Row]:
        # csv enforces a per-field limit itself; the row limit bounds what one line may hold.
        csv.field_size_limit(limits.max_row_bytes)
        with self._open_manifest() as fh:
            lines = _bounded_lines(fh, limits.max_row_bytes)
            # csv reads physical lines (a quoted cell may span several): blank lines are dropped
            # here, which csv would skip anyway.
            text = (
                ("\x00__too_long__\n" if line is None else line.decode("utf-8", errors="surrogateescape") + "\n")
                for _, line in lines
            )
            first = next(text, "")
            if first.startswith("\ufeff"):
                first = first[1:]
            try:
                header = next(csv.reader([first]))
            except (csv.Error, StopIteration):
                raise SourceError(f"{self.manifest_name}: the CSV header cannot be read") from None
            if "image" not in header:
                raise SourceError(f"{self.manifest_name}: the CSV header must have an 'image' column")
            reader = csv.reader(text)
            count = 0
            while True:
                number = reader.line_num + 2  # the header is line 1
                try:
                    cells = next(reader)
                except StopIteration:
                    return
                except csv.Error as exc:
                    count += 1
                    yield Row(number, None, Problem("bad_csv", f"unreadable CSV row ({exc})"))
                    continue
                if not any(c.strip() for c in cells):
                    continue
                count += 1
                if count > limits.max_rows:
                    yield self._too_many(number, limits)
                    return
                if any("\x00__too_long__" in c for c in cells):
                    yield Row(number, None, Problem("row_too_long", f"row longer than {limits.max_row_bytes:,} bytes"))
                    continue
                if any(_has_surrogates(c) for c in cells):
                    yield Row(number, None, Problem("not_utf8", "row is not UTF-8 text"))
                    continue
                if len(cells) > len(header):
                    yield Row(number, None, Problem("bad_csv", "row has more cells than the header"))
                    continue
                yield Row(number, dict(zip(header, cells)))

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()


def _has_surrogates(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
