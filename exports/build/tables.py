"""Parquet twins of JSONL files, with nested values as real nested columns (structs and lists).

A release's JSONL files are written first (one pass over the database); each Parquet file is
then made from its JSONL file in two streaming passes, so memory is one batch of rows:

1. types: a column with a declared type (the schema fields' types from projects.fieldtypes,
   the image struct, ids) keeps it when every value fits; any other column (``metadata``,
   ``provenance``, a value an old schema version stored differently) gets the type Arrow
   infers for each batch, unified over the whole file (structs take the union of their keys,
   ints widen to floats). A column whose values no single Arrow type can hold (a key that is
   a number in one record and a text in another) is written as canonical JSON text and
   listed in ``json_text_columns`` of the result, never silently.
2. rows: batches converted with those types and written in fixed row groups.

A per-split twin has exactly its whole file's types (``split_twin``): every split of a Hugging
Face config has the same features, also where a split never holds a key the whole file has.

A key missing from one record is null in its Parquet struct; ``values_equal`` is that rule.
Same bytes for the same JSONL (fixed settings, no timestamps).
"""

from __future__ import annotations

import base64
import json
import pickle
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from exports.writers import (
    FileDigest,
    canonical_json,
    canonical_json_bytes,
    file_digest,
    json_loads,
    parquet_options,
)

#: Rows per batch of pass 1 (types), and per row group of a file without images.
BATCH_ROWS = 5000
ROW_GROUP_ROWS = 5000
#: Row groups of files with image bytes embedded (a release's per-split records) end at
#: ROW_GROUP_ROWS rows or once their images reach IMAGE_GROUP_BYTES, whichever comes first: a
#: row group holds its images in memory, for the writer and for a reader. (A fixed 256 rows per
#: group made ~3,900 row groups at 1M records, most without an image, whose metadata the writer
#: keeps until it closes the file: ~100 MB, and as much again while closing; bench/scale.py.)
IMAGE_GROUP_BYTES = 32 << 20
#: Hugging Face ``datasets`` reads this schema key for features (Image) stored in Parquet.
HF_SCHEMA_KEY = b"huggingface"
IMAGE_DATA_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def _lines(path: Path, batch: int) -> Iterator[list[dict]]:
    rows: list[dict] = []
    with open(path, "rb") as fh:
        for line in fh:
            rows.append(json_loads(line))
            if len(rows) >= batch:
                yield rows
                rows = []
    if rows:
        yield rows


def _writable(t: pa.DataType) -> pa.DataType:
    """Parquet cannot store a struct without children: an always-empty object is null."""
    if pa.types.is_struct(t):
        if t.num_fields == 0:
            return pa.null()
        return pa.struct([pa.field(f.name, _writable(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(_writable(t.value_type))
    return t


def _holds_null(t: pa.DataType) -> bool:
    """Whether ``t`` is or holds (in a struct or list) the null type of an always-empty object."""
    if pa.types.is_null(t):
        return True
    if pa.types.is_struct(t):
        return any(_holds_null(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _holds_null(t.value_type)
    return False


def _fitter(t: pa.DataType) -> Callable[[object], object]:
    """A function shaping a value for ``t``: nothing where the type is null (an always-empty
    object), struct keys in the type's order (missing ones null), the same for list items.
    Built once per column type: the type tests do not run per value. Needed only where ``t``
    holds a null type (``_holds_null``): elsewhere ``pa.array`` itself takes a struct's
    fields by name, in any order, a missing key as null (and leaves out keys it has no field
    for, as the fitter does)."""
    if pa.types.is_null(t):
        return lambda value: None
    if pa.types.is_struct(t):
        children = [(f.name, _fitter(f.type)) for f in t]

        def fit_struct(value):
            if isinstance(value, dict):
                return {name: fit(value.get(name)) for name, fit in children}
            return value

        return fit_struct
    if pa.types.is_list(t):
        item = _fitter(t.value_type)

        def fit_list(value):
            if isinstance(value, list):
                return [item(v) for v in value]
            return value

        return fit_list
    return lambda value: value


@dataclass
class ParquetResult:
    digest: FileDigest
    schema: pa.Schema
    rows: int
    json_text_columns: list[str] = field(default_factory=list)


def _infer(values: list, current: pa.DataType | None) -> pa.DataType | None:
    """Unified type of ``current`` and the batch's values; None when they do not fit one type."""
    try:
        t = pa.array(values).type
        if current is None:
            return t
        return (
            pa.unify_schemas([pa.schema([("c", current)]), pa.schema([("c", t)])], promote_options="permissive")
            .field("c")
            .type
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
        return None


class _TypePlan:
    """Pass 1 of a Parquet file: each column's type from its values, batch after batch (the
    module docstring's rules), then how pass 2 converts a batch of values."""

    def __init__(self, columns: list[str], declared: dict[str, pa.DataType], json_text=()):
        self.columns, self.declared = columns, declared
        self.types: dict[str, pa.DataType | None] = dict.fromkeys(columns)
        self.fits = {c: c in declared for c in columns}
        self.failed: set[str] = set(json_text)
        self._fitters: dict[str, Callable[[object], object] | None] = {}

    @classmethod
    def following(cls, columns: list[str], final: dict[str, pa.DataType], failed) -> _TypePlan:
        """A split twin's plan: its whole file's final types (``failed``: its JSON text
        columns), no pass 1, every value shaped for its type by the fitter (a key the split
        never holds is null; for values a declared type takes as they are, that is the same
        array)."""
        plan = cls(columns, final, failed)
        plan.final = dict(final)  # the JSON text columns are text there already
        plan.inferred = {c for c in columns if c not in plan.failed}
        return plan

    def observe(self, c: str, values: list) -> None:
        if c in self.failed:
            return
        if self.fits[c]:
            try:
                pa.array(values, type=self.declared[c])
                return
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                self.fits[c] = False
        t = _infer(values, self.types[c])
        if t is None:
            self.failed.add(c)
        self.types[c] = t

    def finish(self) -> dict[str, pa.DataType]:
        """The final type of every column (call once, after the last batch)."""
        self.fits.update(dict.fromkeys(self.failed, False))
        self.final: dict[str, pa.DataType] = {}
        for c in self.columns:
            if c in self.failed:
                self.final[c] = pa.string()
            elif self.fits[c]:
                self.final[c] = self.declared[c]
            else:
                t = self.types[c]
                self.final[c] = _writable(t if t is not None else self.declared.get(c, pa.null()))
        self.inferred = {c for c in self.columns if not self.fits[c] and c not in self.failed}
        return self.final

    def array(self, c: str, values: list) -> pa.Array:
        if c in self.failed:
            values = [None if v is None else canonical_json(v) for v in values]
        elif c in self.inferred:
            if c not in self._fitters:
                t = self.final[c]
                self._fitters[c] = _fitter(t) if _holds_null(t) else None
            fit = self._fitters[c]
            if fit is not None:
                values = [fit(v) for v in values]
        return pa.array(values, type=self.final[c])


def _schema(fields: list[pa.Field], image_columns) -> pa.Schema:
    features = {f.name: hf_feature_json(f.type, image=f.name in image_columns) for f in fields}
    return pa.schema(fields, metadata={HF_SCHEMA_KEY: json.dumps({"info": {"features": features}}).encode()})


def jsonl_to_parquet(
    src: Path,
    dst: Path,
    *,
    columns: list[str],
    declared: dict[str, pa.DataType],
    extra: dict[str, tuple[pa.DataType, Callable[[dict], object]]] | None = None,
    image_columns: tuple[str, ...] = (),
    plan: _TypePlan | None = None,
    batch_rows: int | None = None,
    group_bytes: int | None = None,
) -> ParquetResult:
    """Write ``dst`` from ``src`` (JSONL), columns in ``columns`` order.

    ``declared``: column -> type to use when every value fits. ``extra``: computed columns
    (name -> (type, row -> value)), e.g. the image bytes for Hugging Face's Image feature,
    appended after ``columns``. Row groups: ``batch_rows`` rows, or fewer once the bytes of
    the ``extra`` values in the group reach ``group_bytes`` (:class:`_Groups`). ``plan``: the
    types already decided (``split_twin``: the whole file's), else pass 1 decides them. The
    ``datasets`` features of the file are stored in the Parquet schema metadata,
    ``image_columns`` as Image features (so a bare ``load_dataset("parquet", ...)`` decodes
    the images too).

    The straightforward path, which re-reads the file: a release streams its rows into
    ParquetFamily instead, which falls back to this one where a declared type does not fit.
    """
    extra = extra or {}
    if plan is None:
        plan = _TypePlan(columns, declared)
        for rows in _lines(src, BATCH_ROWS):
            for c in columns:
                plan.observe(c, [r.get(c) for r in rows])
        plan.finish()
    final = plan.final
    fields = [pa.field(c, final[c]) for c in columns] + [pa.field(n, t) for n, (t, _) in extra.items()]
    schema = _schema(fields, image_columns)
    writer = pq.ParquetWriter(str(dst), schema, **parquet_options(schema))
    rows_written = 0
    groups = _Groups(batch_rows or ROW_GROUP_ROWS, group_bytes)
    pending: list[dict] = []
    computed: dict[str, list] = {name: [] for name in extra}

    def write() -> None:
        nonlocal rows_written
        arrays = [plan.array(c, [r.get(c) for r in pending]) for c in columns]
        arrays += [pa.array(computed[name], type=t) for name, (t, _) in extra.items()]
        writer.write_table(pa.Table.from_arrays(arrays, schema=schema), row_group_size=len(pending))
        rows_written += len(pending)
        pending.clear()
        for values in computed.values():
            values.clear()

    try:
        for rows in _lines(src, BATCH_ROWS):
            for r in rows:
                pending.append(r)
                size = 0
                for name, (_, compute) in extra.items():
                    value = compute(r)
                    computed[name].append(value)
                    size += extra_bytes(value)
                if groups.ends(size):
                    write()
        if pending:
            write()
        # An empty split has no row group at all: readers that batch by row group (datasets)
        # refuse a row group of zero rows.
    finally:
        writer.close()
    return ParquetResult(file_digest(dst), schema, rows_written, sorted(plan.failed))


def extra_bytes(value) -> int:
    """The bytes a computed value adds to its row group: an Image feature's ``bytes``."""
    if isinstance(value, dict):
        data = value.get("bytes")
        return len(data) if isinstance(data, (bytes, bytearray)) else 0
    return 0


class _Groups:
    """Where a file's row groups end, row by row (the straightforward writer and the
    streaming one cut the same groups, so their files are byte-identical): after ``rows``
    rows, or earlier at the row whose computed values bring the group to ``max_bytes``."""

    def __init__(self, rows: int, max_bytes: int | None):
        self.rows, self.max_bytes = rows, max_bytes
        self._rows = self._bytes = 0

    def take(self, n: int) -> int:
        """Up to ``n`` more rows of no computed bytes, as many as the group has room for:
        how many it took (then ``full()`` tells whether the group ended with them)."""
        step = min(n, max(self.rows - self._rows, 1))
        self._rows += step
        return step

    def full(self) -> bool:
        if self._rows >= self.rows:
            self._rows = self._bytes = 0
            return True
        return False

    def ends(self, size: int) -> bool:
        """One more row of ``size`` computed bytes: does its group end with it?"""
        self._rows += 1
        self._bytes += size
        if self._rows >= self.rows or (self.max_bytes is not None and self._bytes >= self.max_bytes):
            self._rows = self._bytes = 0
            return True
        return False


def values_equal(a, b) -> bool:
    """JSONL value ``a`` equals Parquet value ``b`` (read back as Python), where a key absent
    in a JSONL object is null in the Parquet struct and bytes are compared as base64."""
    return _norm(a) == _norm(b)


def _norm(v):
    if isinstance(v, dict):
        out = {k: _norm(x) for k, x in v.items()}
        return {k: x for k, x in out.items() if x is not None} or None
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


# ------------------------------------------------------------------------------------------
# Hugging Face ``datasets`` features (YAML of the dataset card and Parquet metadata)
# ------------------------------------------------------------------------------------------


def _hf_dtype(t: pa.DataType) -> str:
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t):
        return "binary"
    return str(t)  # int32, int64, float, double, ...


def hf_feature_yaml(name: str, t: pa.DataType, *, image: bool = False) -> dict:
    """One entry of the card's ``dataset_info.features`` (datasets' own YAML layout)."""
    if image:
        return {"name": name, "dtype": "image"}
    return {"name": name, **_hf_yaml_type(t)}


def _hf_yaml_type(t: pa.DataType) -> dict:
    if pa.types.is_struct(t):
        return {"struct": [hf_feature_yaml(f.name, f.type) for f in t]}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _hf_yaml_type(t.value_type)
        if "dtype" in inner:
            return {"list": inner["dtype"]}
        return {"list": inner.get("struct", inner)}
    return {"dtype": _hf_dtype(t)}


def hf_feature_json(t: pa.DataType, *, image: bool = False) -> dict:
    """The same feature in datasets' JSON form (Parquet schema metadata)."""
    if image:
        return {"_type": "Image"}
    if pa.types.is_struct(t):
        return {f.name: hf_feature_json(f.type) for f in t}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"_type": "List", "feature": hf_feature_json(t.value_type)}
    return {"_type": "Value", "dtype": _hf_dtype(t)}


def split_twin(src: Path, dst: Path, *, whole: ParquetResult, columns: list[str], **kwargs) -> ParquetResult:
    """A per-split Parquet file with exactly the column types of the release's whole file, so
    every split of a Hugging Face config has the same features."""
    final = {name: whole.schema.field(name).type for name in columns}
    plan = _TypePlan.following(columns, final, whole.json_text_columns)
    return jsonl_to_parquet(src, dst, columns=columns, declared=final, plan=plan, **kwargs)


# ------------------------------------------------------------------------------------------
# A release's Parquet files from the rows as they are written (no second read of the JSONL)
# ------------------------------------------------------------------------------------------

_CONVERT_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError)


@dataclass
class SplitOptions:
    """How the per-split twins differ from the whole file (records: image bytes)."""

    extra: dict[str, tuple[pa.DataType, Callable[[dict], object]]] = field(default_factory=dict)
    #: Columns the ``extra`` functions read (the row they get holds only these).
    extra_inputs: tuple[str, ...] = ()
    image_columns: tuple[str, ...] = ()
    batch_rows: int | None = None  # ROW_GROUP_ROWS
    #: row groups end earlier once their ``extra`` values hold this many bytes (jsonl_to_parquet)
    group_bytes: int | None = None


@dataclass
class SpoolPart:
    """The spooled rows of a detached ParquetFamily (``detach``)."""

    folder: Path
    rows: int
    straightforward: bool


class ParquetFamily:
    """A JSONL file's Parquet twin and its per-split twins (``jsonl_to_parquet`` and
    ``split_twin``, byte for byte), built from the rows as the JSONL files are written.

    Columns with a ``declared`` type are converted to Arrow while the rows stream, a batch of
    BATCH_ROWS at a time (pass 1's check is that conversion) and spooled to an Arrow IPC file
    next to the release folder; the other columns (inferred: ``metadata``, ``provenance``) are
    spooled as their values decoded from their canonical JSON, exactly what a re-read of the
    JSONL gives. ``close`` infers those columns' types, then writes every file in one read of
    the spool, so memory stays one batch per file: each batch is converted once, and the
    split twins take their rows from it. Where a declared column does not fit (a
    references workflow's lists), the family stops spooling and ``close`` takes the
    straightforward path over the JSONL files.
    """

    def __init__(
        self,
        *,
        whole: tuple[Path, Path],
        splits: dict[str, tuple[Path, Path]],
        columns: list[str],
        declared: dict[str, pa.DataType],
        split_options: SplitOptions | None = None,
    ):
        self.whole, self.splits, self.columns, self.declared = whole, splits, columns, declared
        self.options = split_options or SplitOptions()
        self.typed = [c for c in columns if c in declared]
        self.free = [c for c in columns if c not in declared]
        self._split_code = {name: code for code, name in enumerate(splits)}
        self._typed_schema = pa.schema([pa.field(c, declared[c]) for c in self.typed])
        # Next to the release folder, named after it (a failed job's clean-up removes it too).
        folder = whole[1].parent
        self._dir = Path(tempfile.mkdtemp(prefix=f"{folder.name}.spool-{whole[1].stem}-", dir=folder.parent))
        self._arrow = pa.ipc.new_stream(str(self._dir / "typed.arrows"), self._typed_schema)
        self._values = open(self._dir / "free.pickle", "wb")  # noqa: SIM115 - closed in close()
        self._rows: list[dict] = []
        self._codes: list[int] = []
        self._straightforward = False
        self._more: list[Path] = []  # other families' spools this one closes with (close_with)
        self.rows = 0

    def add(self, row: dict, split: str) -> None:
        """One row (as written to the whole JSONL file) of split ``split``."""
        if self._straightforward:
            return
        self._rows.append(row)
        self._codes.append(self._split_code[split])
        if len(self._rows) >= BATCH_ROWS:
            self._spool()

    def _spool(self) -> None:
        # The batch's split codes go with it (a list of every row's was 16 MB at 2M annotations).
        rows, codes, self._rows, self._codes = self._rows, self._codes, [], []
        if not rows or self._straightforward:
            return
        try:
            arrays = [pa.array([r.get(c) for r in rows], type=self.declared[c]) for c in self.typed]
        except _CONVERT_ERRORS:
            self._straightforward = True  # jsonl_to_parquet infers that column over the whole file
            return
        self._arrow.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self._typed_schema))
        free = {c: [_as_read_back(r.get(c)) for r in rows] for c in self.free}
        pickle.dump((free, codes), self._values, protocol=pickle.HIGHEST_PROTOCOL)
        self.rows += len(rows)

    def _batches(self) -> Iterator[tuple[pa.RecordBatch, dict, list[int]]]:
        # Read, not memory-mapped (a path is mapped: every page read stayed in the RSS until the
        # family closed, ~450 MB at 1M records; bench/scale.py).
        for folder in (self._dir, *self._more):
            with (
                pa.OSFile(str(folder / "typed.arrows")) as source,
                pa.ipc.open_stream(source) as typed,
                open(folder / "free.pickle", "rb") as fh,
            ):
                for batch in typed:
                    free, codes = pickle.load(fh)
                    yield batch, free, codes

    def close(self) -> dict[str, ParquetResult]:
        """Write every file; returns {"whole" or split name: ParquetResult}."""
        try:
            self._spool()
            self._close_spool()
            if self._straightforward:
                return self._straightforward_path()
            return self._write()
        finally:
            for folder in (self._dir, *self._more):
                shutil.rmtree(folder, ignore_errors=True)

    def detach(self) -> SpoolPart:
        """End this family's spooling without writing its files: its rows, to be written by
        another family of the same columns (``close_with``; a part of the rows written in
        another process: the spool is files, the part is picklable)."""
        self._spool()
        self._close_spool()
        return SpoolPart(self._dir, self.rows, self._straightforward)

    def close_with(self, parts: list[SpoolPart]) -> dict[str, ParquetResult]:
        """``close`` with the rows of ``parts`` after this family's own, in their order: the
        files one family given all those rows in that order writes. Where a part fell back to
        the straightforward path, so does this one (over this family's JSONL files, which
        must hold every part's lines by then)."""
        self._more = [part.folder for part in parts]
        self.rows += sum(part.rows for part in parts)
        if any(part.straightforward for part in parts):
            self._straightforward = True
        return self.close()

    def abort(self) -> None:
        """Drop the spool (the build failed)."""
        self._close_spool()
        for folder in (self._dir, *self._more):
            shutil.rmtree(folder, ignore_errors=True)

    def _close_spool(self) -> None:
        if not self._values.closed:
            self._arrow.close()
            self._values.close()

    def _straightforward_path(self) -> dict[str, ParquetResult]:
        src, dst = self.whole
        out = {"whole": jsonl_to_parquet(src, dst, columns=self.columns, declared=self.declared)}
        o = self.options
        for split, (src, dst) in self.splits.items():
            out[split] = split_twin(
                src,
                dst,
                whole=out["whole"],
                columns=self.columns,
                extra=o.extra,
                image_columns=o.image_columns,
                batch_rows=o.batch_rows,
                group_bytes=o.group_bytes,
            )
        return out

    def _write(self) -> dict[str, ParquetResult]:
        # Pass 1 of the free columns (the whole file's; every split twin follows its types).
        whole = _TypePlan(self.columns, self.declared)
        for _, free, _ in self._batches() if self.free else ():
            for c in self.free:
                whole.observe(c, free[c])
        final = whole.finish()
        fields = [pa.field(c, final[c]) for c in self.columns]
        body = pa.schema(fields)
        o = self.options
        split_schema = _schema(fields + [pa.field(n, t) for n, (t, _) in o.extra.items()], o.image_columns)
        failed = sorted(whole.failed)
        outputs = {"whole": _Output(self.whole[1], _schema(fields, ()), _Groups(ROW_GROUP_ROWS, None), {}, (), failed)}
        for split, (_, path) in self.splits.items():
            groups = _Groups(o.batch_rows or ROW_GROUP_ROWS, o.group_bytes)
            outputs[split] = _Output(path, split_schema, groups, o.extra, o.extra_inputs, failed)
        names = list(self.splits)
        # Pass 2: one read of the spool, every file at once; each batch's free columns are
        # converted once, and a split's rows are taken from the whole batch (split_twin's
        # values: the whole file's types and shaping, exports/tests/test_parquet_family.py).
        try:
            for batch, free, codes in self._batches():
                arrays = [whole.array(c, free[c]) if c in free else batch.column(c) for c in self.columns]
                rows = pa.RecordBatch.from_arrays(arrays, schema=body)
                outputs["whole"].add(rows)
                codes = np.asarray(codes, dtype=np.int8)
                for k, split in enumerate(names):
                    picked = np.flatnonzero(codes == k)
                    if not len(picked):
                        continue
                    outputs[split].add(rows if len(picked) == len(codes) else rows.take(pa.array(picked)))
            return {name: out.close() for name, out in outputs.items()}
        finally:
            for out in outputs.values():
                out.abort()


def _as_read_back(value):
    """``value`` as decoding its canonical JSON gives it back (keys sorted, tuples as lists).

    Straight through orjson (3.2x ``json_loads(canonical_json_bytes(value))`` on a release's
    metadata and provenance, 2M values at 1M records): the same value, since the text checks
    of those two only keep the text byte-identical to the stdlib's (floats) or catch integers
    beyond 64 bits, which ``orjson.dumps`` refuses (TypeError: the careful path, as for keys
    that are not text)."""
    if value is None or isinstance(value, str):
        return value
    try:
        return orjson.loads(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
    except TypeError:
        return json_loads(canonical_json_bytes(value))


class _Output:
    """One Parquet file of a family: pass 2 in the row groups of ``groups`` (:class:`_Groups`),
    each row's computed values (``extra``: an image's bytes, from the ``extra_inputs`` read
    back from the row's Arrow columns) computed as its row arrives, so a group holds its own
    images only."""

    def __init__(self, path: Path, schema: pa.Schema, groups: _Groups, extra: dict, extra_inputs, failed: list[str]):
        self.path, self.schema, self.groups, self.failed = path, schema, groups, failed
        self.extra, self.extra_inputs = extra, extra_inputs
        self._writer = pq.ParquetWriter(str(path), schema, **parquet_options(schema))
        self._rows: list[pa.RecordBatch] = []
        self._computed: dict[str, list] = {name: [] for name in extra}
        self._pending = 0
        self.rows = 0
        self._closed = False

    def add(self, rows: pa.RecordBatch) -> None:
        self._rows.append(rows)
        inputs = None
        if self.extra:
            inputs = {c: rows.column(c).to_pylist() for c in self.extra_inputs}
        else:
            # No computed values, so no bytes: the groups end every ``groups.rows`` rows, as
            # ``ends(0)`` row by row gives, without a Python step per row (7M rows at 1M items).
            left = rows.num_rows
            while left:
                step = self.groups.take(left)
                self._pending += step
                left -= step
                if self.groups.full():
                    self._write(self._pending)
            return
        for i in range(rows.num_rows):
            size = 0
            if inputs is not None:
                row = {c: inputs[c][i] for c in self.extra_inputs}
                for name, (_, compute) in self.extra.items():
                    value = compute(row)
                    self._computed[name].append(value)
                    size += extra_bytes(value)
            self._pending += 1
            if self.groups.ends(size):
                self._write(self._pending)

    def _write(self, n: int) -> None:
        rows = pa.Table.from_batches(self._rows, schema=self._rows[0].schema)
        head, rest = rows.slice(0, n), rows.slice(n)
        self._rows = rest.to_batches() if rest.num_rows else []  # zero-copy: only the head is copied
        arrays = [column.combine_chunks() for column in head.columns]
        for name, (t, _) in self.extra.items():
            arrays.append(pa.array(self._computed[name][:n], type=t))
            del self._computed[name][:n]
        self._pending -= n
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema), row_group_size=n)
        self.rows += n

    def close(self) -> ParquetResult:
        if self._pending:
            self._write(self._pending)
        self._writer.close()
        self._closed = True
        return ParquetResult(file_digest(self.path), self.schema, self.rows, list(self.failed))

    def abort(self) -> None:
        if not self._closed:
            self._writer.close()
            self._closed = True
