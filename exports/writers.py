"""Streaming, deterministic release writers. No Django: bench/export.py drives them directly.

Every writer takes records one at a time and keeps at most one batch in memory, so memory stays
flat in the number of records. Output is byte-for-byte reproducible: canonical JSON (sorted keys,
no whitespace, UTF-8), records in the caller's order, Parquet with fixed settings and fixed
row-group size, no wall-clock time anywhere.

The record shape (one per released item) is documented in the release README; ``gold`` holds
the schema fields, ``image`` the image reference.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from projects.fieldtypes import REGISTRY

JSONL_FLUSH_LINES = 2000
#: ... or this many bytes, whichever first (a release's records are ~7 KB each: 2,000 of them in
#: each of two files were ~28 MB of the build's memory, bench/scale.py).
JSONL_FLUSH_BYTES = 1 << 20
PARQUET_BATCH_ROWS = 25_000  # rows per row group
PARQUET_CONVERT_ROWS = 5_000  # rows held as Python objects before conversion to Arrow
# Fixed Parquet settings: same bytes for the same rows (pyarrow writes no timestamp; its
# "created_by" names the library version, which is pinned in requirements/base.txt). Dictionary
# encoding only where values repeat (see _dictionary_columns): on unique ids and hashes it only
# costs time and memory before Parquet falls back to plain encoding.
PARQUET_OPTIONS = {
    "compression": "zstd",
    "compression_level": 3,
    "write_statistics": True,
    "version": "2.6",
    "data_page_version": "1.0",
}
DICTIONARY_COLUMNS = ["source_dataset", "language", "domain", "split", "image.format"]
#: Text columns whose row-group min/max help a reader skip row groups (short categories and
#: ISO times). Other text and bytes (meme text, JSON, image bytes) get no statistics: each row
#: group's min and max of them are whole values, held in memory until the file closes and
#: written to its footer (a 1M-item release's records/train.parquet: 3,300 row groups, some
#: 500 MB of RSS; bench/scale.py), and no reader filters on them.
STATISTICS_TEXT_COLUMNS = frozenset(
    {
        "source_dataset",
        "language",
        "domain",
        "split",
        "kind",
        "annotator",
        "provider",
        "provider_kind",
        "model_name",
        "prompt_version",
        "submitted_at",
        "last_submitted_at",
    }
)


def parquet_options(schema: pa.Schema) -> dict:
    """PARQUET_OPTIONS for a file of ``schema``: statistics for every leaf column but text and
    bytes outside STATISTICS_TEXT_COLUMNS (leaf paths as Parquet names them: ``image.width``,
    ``gold.boxes.list.element.x``)."""
    leaves: list[str] = []

    def walk(path: str, top: str, t: pa.DataType) -> None:
        if pa.types.is_struct(t):
            for f in t:
                walk(f"{path}.{f.name}", top, f.type)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(f"{path}.list.element", top, t.value_type)
        elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t):
            if top in STATISTICS_TEXT_COLUMNS:
                leaves.append(path)
        elif not pa.types.is_null(t):
            leaves.append(path)

    for f in schema:
        walk(f.name, f.name, f.type)
    return {**PARQUET_OPTIONS, "write_statistics": leaves}


# One encoder for every call: json.dumps with options builds a new one each time (~10% of the
# cost of a record).
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def canonical_json(obj: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 text, no NaN/Infinity (not JSON)."""
    return _CANONICAL.encode(obj)


#: Where orjson's text may differ from the stdlib's: floats below 1e-4 (the stdlib writes
#: 1e-05, orjson 0.00001 or 1e-6). A number in orjson's compact output starts the text or
#: follows ``:``, ``,`` or ``[``, so a time such as "12:00:40.000000Z" is not taken for one. A
#: match (also a false one, inside a string) takes the stdlib path, so the output stays
#: byte-identical; a miss cannot hide a difference. The substring tests come first: they are
#: C-fast, the regex runs only on the rare candidates.
_ORJSON_DIFFERS = re.compile(rb"(?:^|[:,\[])-?(?:0\.0000|\d[\d.]*e-)")


def canonical_json_bytes(obj: Any) -> bytes:
    """``canonical_json(obj)`` as UTF-8, byte for byte, through orjson when that is the same
    (bench/export.py: the stdlib encoder was 2.2x a plain orjson writer). Inputs orjson refuses
    (non-string keys, integers beyond 64 bits) take the stdlib path. NaN/Infinity, which the
    stdlib (allow_nan=False) refuses and no database JSON holds, are written as null, as
    ``finite`` does for the release's JSON files."""
    try:
        out = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return _CANONICAL.encode(finite(obj)).encode()
    if (b"e-" in out or b"0.0000" in out) and _ORJSON_DIFFERS.search(out):
        return _CANONICAL.encode(finite(obj)).encode()
    return out


#: 19 or more digits in a row may be an integer beyond 64 bits, which orjson reads as a float
#: (losing digits) and the stdlib exactly; floats never print such runs (17 significant
#: digits). Found by mapping every digit to 0 and one substring search (C speed; a regex
#: scan cost as much as the decoding).
_ALL_DIGITS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19


def json_loads(data: bytes | str) -> Any:
    """JSON text -> Python, through orjson (~6x the stdlib on release lines); text where
    orjson would read something else (integers beyond 64 bits, e.g. an id in imported
    metadata) or that it refuses takes the stdlib path."""
    raw = data.encode() if isinstance(data, str) else data
    if _LONG_RUN in raw.translate(_ALL_DIGITS_ZERO):
        return json.loads(raw)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def finite(obj: Any) -> Any:
    """Replace NaN/Infinity (not representable in JSON) by None, recursively."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


@dataclass(frozen=True)
class FileDigest:
    sha256: str
    bytes: int

    def as_dict(self) -> dict:
        return {"sha256": self.sha256, "bytes": self.bytes}


class HashingFile:
    """A binary file that hashes what it writes (no second read of the file)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fh = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        self._sha = hashlib.sha256()
        self._n = 0

    def write(self, data: bytes) -> None:
        self._sha.update(data)
        self._n += len(data)
        self._fh.write(data)

    def close(self) -> FileDigest:
        self._fh.close()
        return FileDigest(self._sha.hexdigest(), self._n)


def file_digest(path: Path, chunk: int = 1 << 20) -> FileDigest:
    sha, n = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            sha.update(block)
            n += len(block)
    return FileDigest(sha.hexdigest(), n)


def write_json(path: Path, obj: Any) -> FileDigest:
    out = HashingFile(path)
    out.write((canonical_json(obj) + "\n").encode())
    return out.close()


def write_text(path: Path, text: str) -> FileDigest:
    out = HashingFile(path)
    out.write(text.encode())
    return out.close()


class JsonlWriter:
    """One canonical JSON object per line, written in batches of lines."""

    def __init__(self, path: Path, flush_lines: int = JSONL_FLUSH_LINES, flush_bytes: int = JSONL_FLUSH_BYTES):
        self._out = HashingFile(path)
        self._lines: list[bytes] = []
        self._flush_lines, self._flush_bytes = flush_lines, flush_bytes
        self._pending = 0
        self.count = 0

    def write(self, record: dict) -> bytes:
        """Write one record; returns its line (without the newline) for ``write_line``."""
        line = canonical_json_bytes(record)
        self.write_line(line)
        return line

    def write_line(self, line: bytes) -> None:
        """Write a line already encoded by ``write`` (a record in the whole file and its split's)."""
        self._lines.append(line)
        self.count += 1
        self._pending += len(line)
        if len(self._lines) >= self._flush_lines or self._pending >= self._flush_bytes:
            self._flush()

    def _flush(self) -> None:
        if self._lines:
            self._out.write(b"\n".join(self._lines) + b"\n")
            self._lines, self._pending = [], 0

    def close(self) -> FileDigest:
        self._flush()
        return self._out.close()


# ------------------------------------------------------------------------------------------
# Parquet
# ------------------------------------------------------------------------------------------

# Arrow type of each schema field type's export form (projects.fieldtypes.REGISTRY names).
# A type missing here is exported as its canonical JSON text, so a new field type never breaks
# a release; give it a native type here when it is added.
IMAGE_STRUCT = pa.struct(
    [
        ("file", pa.string()),
        ("format", pa.string()),
        ("height", pa.int32()),
        ("phash", pa.string()),
        ("pixel_hash", pa.string()),
        ("redistributable", pa.bool_()),
        ("sha256", pa.string()),
        ("width", pa.int32()),
    ]
)

BASE_COLUMNS = [
    ("item_id", pa.int64()),
    ("source_id", pa.string()),
    ("source_dataset", pa.string()),
    ("import_key", pa.string()),
    ("text", pa.string()),
    ("title", pa.string()),
    ("language", pa.string()),
    ("domain", pa.string()),
    ("split", pa.string()),
    ("near_duplicate_group", pa.int64()),
    ("image", IMAGE_STRUCT),
]
JSON_TEXT_COLUMNS = {"provenance", "metadata"}  # heterogeneous objects: canonical JSON text in Parquet
TAIL_COLUMNS = [
    ("metadata", pa.string()),
    ("provenance", pa.string()),
    ("gold_revision", pa.int32()),
    ("schema_version", pa.int32()),
    ("lexicon_version", pa.int32()),
]


def records_arrow_schema(fields: list[dict], references: frozenset[str] = frozenset()) -> pa.Schema:
    """Parquet schema of records.parquet for a project schema's ``fields``; a field kept as
    references (projects.workflow) is a list column of the type's own."""
    # Each field type owns its export form, Parquet column type included (projects.fieldtypes).
    gold = pa.struct(
        [
            (
                f["name"],
                pa.list_(REGISTRY[f["type"]].arrow_type(f))
                if f["name"] in references
                else REGISTRY[f["type"]].arrow_type(f),
            )
            for f in fields
        ]
    )
    return pa.schema([*BASE_COLUMNS, ("gold", gold), *TAIL_COLUMNS])


class ParquetRecordsWriter:
    """records.parquet in row groups of ``batch_rows`` (fixed: the bytes depend on it).

    Rows are collected per leaf column (struct children separately, no dict per row kept) and
    turned into Arrow arrays every ``convert_rows`` rows, so Python holds at most that many
    rows; a row group is written once ``batch_rows`` rows are in Arrow memory (compact).
    """

    def __init__(
        self,
        path: Path,
        fields: list[dict],
        batch_rows: int = PARQUET_BATCH_ROWS,
        convert_rows: int = PARQUET_CONVERT_ROWS,
        references: frozenset[str] = frozenset(),
    ):
        self.path = Path(path)
        self.schema = records_arrow_schema(fields, references)
        self._image_keys = [f.name for f in IMAGE_STRUCT]
        self._gold_type = self.schema.field("gold").type
        self._gold_keys = [f.name for f in self._gold_type]
        self._scalar_columns = [name for name, _ in BASE_COLUMNS if name != "image"] + [
            name for name, _ in TAIL_COLUMNS
        ]
        self._batch_rows = batch_rows
        self._convert_rows = min(convert_rows, batch_rows)
        dictionary = DICTIONARY_COLUMNS + [
            f"gold.{f['name']}" for f in fields if "dictionary" in REGISTRY[f["type"]].roles
        ]
        self._writer = pq.ParquetWriter(
            str(self.path), self.schema, use_dictionary=dictionary, **parquet_options(self.schema)
        )
        self._batches: list[pa.RecordBatch] = []
        self._arrow_rows = 0
        self._reset()
        self.count = 0

    def _reset(self) -> None:
        self._scalars: dict[str, list] = {c: [] for c in self._scalar_columns}
        self._image: dict[str, list] = {k: [] for k in self._image_keys}
        self._gold: dict[str, list] = {k: [] for k in self._gold_keys}
        self._rows = 0

    def write(self, record: dict) -> None:
        for name, column in self._scalars.items():
            value = record.get(name)
            if name in JSON_TEXT_COLUMNS:
                value = canonical_json(value if value is not None else {})
            column.append(value)
        image = record["image"]
        for key, column in self._image.items():
            column.append(image.get(key))
        gold = record["gold"]
        for key, column in self._gold.items():
            column.append(gold.get(key))
        self._rows += 1
        self.count += 1
        if self._rows >= self._convert_rows:
            self._convert()
        if self._arrow_rows >= self._batch_rows:
            self._write_row_group()

    def _convert(self) -> None:
        if not self._rows:
            return
        schema = self.schema
        arrays = []
        for name in schema.names:
            if name == "image":
                arrays.append(
                    pa.StructArray.from_arrays(
                        [pa.array(self._image[k], type=IMAGE_STRUCT.field(k).type) for k in self._image_keys],
                        fields=list(IMAGE_STRUCT),
                    )
                )
            elif name == "gold":
                arrays.append(
                    pa.StructArray.from_arrays(
                        [pa.array(self._gold[k], type=self._gold_type.field(k).type) for k in self._gold_keys],
                        fields=list(self._gold_type),
                    )
                )
            else:
                arrays.append(pa.array(self._scalars[name], type=schema.field(name).type))
        self._batches.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
        self._arrow_rows += self._rows
        self._reset()

    def _write_row_group(self) -> None:
        if not self._arrow_rows:
            return
        table = pa.Table.from_batches(self._batches, schema=self.schema)
        self._writer.write_table(table, row_group_size=self._batch_rows)
        self._batches, self._arrow_rows = [], 0

    def close(self) -> FileDigest:
        self._convert()
        self._write_row_group()
        self._writer.close()
        return file_digest(self.path)


# ------------------------------------------------------------------------------------------
# COCO
# ------------------------------------------------------------------------------------------

UNSPECIFIED_CATEGORY = "unspecified"


def box_to_pixels(box: list[int], width: int, height: int, scale: int = 1000) -> list[float]:
    """[x1, y1, x2, y2] normalized to [0, scale] -> COCO [x, y, w, h] in pixels (2 decimals)."""
    x1, y1, x2, y2 = box
    sx, sy = width / scale, height / scale
    return [round(x1 * sx, 2), round(y1 * sy, 2), round((x2 - x1) * sx, 2), round((y2 - y1) * sy, 2)]


def box_polygon(bbox: list[float]) -> list[float]:
    """COCO [x, y, w, h] -> the rectangle's polygon [x1, y1, x2, y1, x2, y2, x1, y2]."""
    x, y, w, h = bbox
    return [x, y, round(x + w, 2), y, round(x + w, 2), round(y + h, 2), x, round(y + h, 2)]


#: Bytes a CocoWriter gathers before writing them.
COCO_FLUSH_BYTES = 1 << 20


class CocoWriter:
    """COCO-style detection JSON: images, one category per target category, pixel boxes.

    Written in one pass: annotations stream into the output while images stream into a spool
    file that is appended at the end (top-level keys in sorted order: annotations, categories,
    images, info, licenses).
    """

    def __init__(
        self, path: Path, *, categories: list[str], info: dict, licenses: list[dict] | None = None, scale: int = 1000
    ):
        self.path = Path(path)
        self._spool_path = self.path.with_name(self.path.name + ".images.tmp")
        self._out = HashingFile(self.path)
        self._spool = open(self._spool_path, "wb")  # noqa: SIM115 - closed in close()
        self._category_ids = {name: i for i, name in enumerate(categories, start=1)}
        self._categories = [
            {"id": i, "name": name, "supercategory": "target"} for name, i in self._category_ids.items()
        ]
        self._info = info
        self._licenses = licenses or []
        self._scale = scale
        self._next_annotation = 1
        self._first_annotation = True
        self._first_image = True
        self.images = 0
        self.annotations = 0
        # Pieces gathered and written ~1 MB at a time: a write (and a hash update) per item
        # and per box was ~1.3M calls at 1M items, ~4 s of the records part (bench/scale.py).
        self._images_buf: list[bytes] = []
        self._out_buf: list[bytes] = []
        self._buffered = 0
        self._out.write(b'{"annotations":[')

    def _gather(self, buf: list[bytes], piece: bytes) -> None:
        buf.append(piece)
        self._buffered += len(piece)
        if self._buffered >= COCO_FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._images_buf:
            self._spool.write(b"".join(self._images_buf))
            self._images_buf.clear()
        if self._out_buf:
            self._out.write(b"".join(self._out_buf))
            self._out_buf.clear()
        self._buffered = 0

    def add(self, *, image: dict, boxes: list[list[int]], category: str | None) -> None:
        """One released item: its image entry and one annotation per box."""
        self._gather(self._images_buf, (b"" if self._first_image else b",") + canonical_json_bytes(image))
        self._first_image = False
        self.images += 1
        if not boxes:
            return
        category_id = self._category_ids.get(category) if category is not None else None
        if category_id is None:
            category_id = self._category_ids.get(UNSPECIFIED_CATEGORY)
        parts = []
        for box in boxes:
            bbox = box_to_pixels(box, image["width"], image["height"], self._scale)
            parts.append(
                canonical_json_bytes(
                    {
                        "id": self._next_annotation,
                        "image_id": image["id"],
                        "category_id": category_id,
                        "bbox": bbox,
                        # The box as a polygon (clockwise from the top-left corner), for tools
                        # that read masks from ``segmentation`` (pycocotools' annToMask).
                        "segmentation": [box_polygon(bbox)],
                        "area": round(bbox[2] * bbox[3], 2),
                        "iscrowd": 0,
                        "bbox_normalized_1000": list(box),
                    }
                )
            )
            self._next_annotation += 1
        self.annotations += len(parts)
        self._gather(self._out_buf, (b"" if self._first_annotation else b",") + b",".join(parts))
        self._first_annotation = False

    def close(self) -> FileDigest:
        self._flush()
        self._spool.close()
        self._out.write(b'],"categories":' + canonical_json(self._categories).encode() + b',"images":[')
        with open(self._spool_path, "rb") as fh:
            while block := fh.read(1 << 20):
                self._out.write(block)
        self._out.write(
            b'],"info":'
            + canonical_json(self._info).encode()
            + b',"licenses":'
            + canonical_json(self._licenses).encode()
            + b"}\n"
        )
        self._spool_path.unlink()
        return self._out.close()

    def abort(self) -> None:
        self._spool.close()
        self._out.close()


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link an immutable, content-addressed media file into the release (copy across devices).

    A name that exists already holds the same bytes (the name is their sha256): nothing to do.
    """
    if dst.exists():
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
