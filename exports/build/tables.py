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

A key missing from one record is null in its Parquet struct; ``values_equal`` is that rule.
Same bytes for the same JSONL (fixed settings, no timestamps).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from exports.writers import PARQUET_OPTIONS, FileDigest, canonical_json, file_digest, json_loads

BATCH_ROWS = 5000
#: Row groups of records with image bytes embedded stay small (a batch holds its images).
IMAGE_BATCH_ROWS = 256
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


def _fit(value, t: pa.DataType):
    """``value`` shaped for ``t``: nothing where the type is null (an always-empty object)."""
    if value is None or pa.types.is_null(t):
        return None
    if pa.types.is_struct(t) and isinstance(value, dict):
        return {f.name: _fit(value.get(f.name), f.type) for f in t}
    if pa.types.is_list(t) and isinstance(value, list):
        return [_fit(v, t.value_type) for v in value]
    return value


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


def jsonl_to_parquet(
    src: Path,
    dst: Path,
    *,
    columns: list[str],
    declared: dict[str, pa.DataType],
    extra: dict[str, tuple[pa.DataType, Callable[[dict], object]]] | None = None,
    image_columns: tuple[str, ...] = (),
    json_text: tuple[str, ...] | list[str] = (),
    batch_rows: int = BATCH_ROWS,
) -> ParquetResult:
    """Write ``dst`` from ``src`` (JSONL), columns in ``columns`` order.

    ``declared``: column -> type to use when every value fits. ``extra``: computed columns
    (name -> (type, row -> value)), e.g. the image bytes for Hugging Face's Image feature,
    appended after ``columns``. ``json_text``: columns to write as JSON text whatever they
    hold (the split files of a release follow their whole file's types). The ``datasets`` features of the file are stored in the Parquet
    schema metadata, ``image_columns`` as Image features (so a bare ``load_dataset("parquet",
    ...)`` decodes the images too).
    """
    extra = extra or {}
    types: dict[str, pa.DataType | None] = dict.fromkeys(columns)
    fits = {c: c in declared for c in columns}
    failed: set[str] = set(json_text)
    for rows in _lines(src, BATCH_ROWS):
        for c in columns:
            values = [r.get(c) for r in rows]
            if c in failed:
                continue
            if fits[c]:
                try:
                    pa.array(values, type=declared[c])
                    continue
                except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                    fits[c] = False
            t = _infer(values, types[c])
            if t is None:
                failed.add(c)
            types[c] = t
    fits.update(dict.fromkeys(failed, False))
    final: dict[str, pa.DataType] = {}
    for c in columns:
        if c in failed:
            final[c] = pa.string()
        elif fits[c]:
            final[c] = declared[c]
        else:
            final[c] = _writable(types[c] if types[c] is not None else declared.get(c, pa.null()))
    fields = [pa.field(c, final[c]) for c in columns] + [pa.field(n, t) for n, (t, _) in extra.items()]
    features = {f.name: hf_feature_json(f.type, image=f.name in image_columns) for f in fields}
    schema = pa.schema(fields, metadata={HF_SCHEMA_KEY: json.dumps({"info": {"features": features}}).encode()})
    inferred = {c for c in columns if not fits[c] and c not in failed}
    writer = pq.ParquetWriter(str(dst), schema, **PARQUET_OPTIONS)
    rows_written = 0
    try:
        for rows in _lines(src, batch_rows):
            arrays = []
            for c in columns:
                values = [r.get(c) for r in rows]
                if c in failed:
                    values = [None if v is None else canonical_json(v) for v in values]
                elif c in inferred:
                    values = [_fit(v, final[c]) for v in values]
                arrays.append(pa.array(values, type=final[c]))
            for _name, (t, compute) in extra.items():
                arrays.append(pa.array([compute(r) for r in rows], type=t))
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema), row_group_size=batch_rows)
            rows_written += len(rows)
        # An empty split has no row group at all: readers that batch by row group (datasets)
        # refuse a row group of zero rows.
    finally:
        writer.close()
    return ParquetResult(file_digest(dst), schema, rows_written, sorted(failed))


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
    declared = {name: whole.schema.field(name).type for name in columns}
    return jsonl_to_parquet(src, dst, columns=columns, declared=declared, json_text=whole.json_text_columns, **kwargs)
