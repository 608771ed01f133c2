"""exports.build.tables: JSONL -> Parquet with nested columns, no database."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from exports.build.tables import hf_feature_json, hf_feature_yaml, jsonl_to_parquet, split_twin, values_equal


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_free_form_objects_become_one_unified_struct(tmp_path):
    rows = [{"id": 1, "meta": {"a": 1}}, {"id": 2, "meta": {"b": "x", "a": 2.5}}, {"id": 3, "meta": {}}]
    src = write(tmp_path / "a.jsonl", rows)
    # tiny batches: the type is unified across batches, not taken from the first
    r = jsonl_to_parquet(src, tmp_path / "a.parquet", columns=["id", "meta"], declared={"id": pa.int64()})
    t = pq.read_table(tmp_path / "a.parquet")
    assert t.schema.field("meta").type == pa.struct([("a", pa.float64()), ("b", pa.string())])
    assert r.json_text_columns == [] and r.rows == 3
    for a, b in zip(rows, t.to_pylist()):
        assert all(values_equal(a[k], b[k]) for k in a)


def test_a_declared_type_that_does_not_fit_falls_back_to_inference(tmp_path):
    # a references workflow keeps a list of captions where the schema's type is one text
    gold = pa.struct([("caption", pa.string())])
    rows = [{"gold": {"caption": ["one", "two"]}}, {"gold": {"caption": ["three"]}}]
    src = write(tmp_path / "g.jsonl", rows)
    jsonl_to_parquet(src, tmp_path / "g.parquet", columns=["gold"], declared={"gold": gold})
    t = pq.read_table(tmp_path / "g.parquet")
    assert t.schema.field("gold").type == pa.struct([("caption", pa.list_(pa.string()))])
    assert t.to_pylist() == rows


def test_values_no_type_can_hold_are_json_text_and_reported(tmp_path):
    rows = [{"m": {"k": 1}}, {"m": {"k": "text"}}, {"m": {"k": [1]}}]
    src = write(tmp_path / "m.jsonl", rows)
    r = jsonl_to_parquet(src, tmp_path / "m.parquet", columns=["m"], declared={})
    assert r.json_text_columns == ["m"]
    back = pq.read_table(tmp_path / "m.parquet").column("m").to_pylist()
    assert [json.loads(v) for v in back] == [r["m"] for r in rows]


def test_always_empty_objects_and_empty_files(tmp_path):
    src = write(tmp_path / "e.jsonl", [{"m": {}}, {"m": {}}])
    jsonl_to_parquet(src, tmp_path / "e.parquet", columns=["m"], declared={})
    assert pq.read_table(tmp_path / "e.parquet").column("m").to_pylist() == [None, None]
    whole = jsonl_to_parquet(
        write(tmp_path / "w.jsonl", [{"m": {"a": 1}}]), tmp_path / "w.parquet", columns=["m"], declared={}
    )
    empty = split_twin(write(tmp_path / "s.jsonl", []), tmp_path / "s.parquet", whole=whole, columns=["m"])
    t = pq.read_table(tmp_path / "s.parquet")
    assert t.num_rows == 0 and empty.schema.field("m").type == whole.schema.field("m").type
    assert pq.ParquetFile(tmp_path / "s.parquet").num_row_groups == 0


def test_hugging_face_features():
    t = pa.struct([("boxes", pa.list_(pa.list_(pa.int32()))), ("tags", pa.list_(pa.string()))])
    assert hf_feature_yaml("gold", t) == {
        "name": "gold",
        "struct": [{"name": "boxes", "list": {"list": "int32"}}, {"name": "tags", "list": "string"}],
    }
    assert hf_feature_yaml("image_data", pa.struct([]), image=True) == {"name": "image_data", "dtype": "image"}
    assert hf_feature_json(pa.list_(pa.struct([("a", pa.bool_())]))) == {
        "_type": "List",
        "feature": {"a": {"_type": "Value", "dtype": "bool"}},
    }


def test_the_fitter_runs_only_where_pyarrow_alone_would_differ():
    """A struct or list type without a null type inside: ``pa.array`` of the raw values is the
    fitted array (fields by name in any order, missing keys null, unknown keys left out)."""
    from exports.build.tables import _fitter, _holds_null

    inner = pa.struct([("p", pa.int64()), ("q", pa.string())])
    t = pa.struct([("a", pa.int64()), ("b", pa.struct([("x", pa.string()), ("y", pa.list_(inner))]))])
    values = [
        {"b": {"y": [{"q": "z"}, {"q": "w", "p": 1, "extra": 3}], "x": "s"}, "a": 1},
        {"a": 2, "unknown": {"deep": True}},
        None,
        {"b": None},
        {"b": {"y": None}},
        {},
    ]
    assert not _holds_null(t)
    fit = _fitter(t)
    assert pa.array(values, type=t).equals(pa.array([fit(v) for v in values], type=t))
    with_null = pa.struct([("a", pa.int64()), ("e", pa.list_(pa.struct([("n", pa.null())])))])
    assert _holds_null(with_null) and _holds_null(pa.null()) and not _holds_null(pa.list_(pa.string()))
    fit = _fitter(with_null)
    assert pa.array([fit({"a": 1, "e": [{"n": {}}]})], type=with_null).to_pylist() == [{"a": 1, "e": [{"n": None}]}]


def test_a_value_as_read_back_is_what_decoding_its_canonical_json_gives():
    from exports.build.tables import _as_read_back
    from exports.writers import canonical_json_bytes, json_loads

    values = [
        {"b": 1, "a": {"z": [1, 2.5, (3, 4)], "y": "é\u2028\U0001f600"}},
        {"big": 2**70, "neg": -(2**63), "u64": 2**64 - 1, "tiny": 1e-7, "nan": float("nan"), "inf": float("inf")},
        {1: "a non-text key"},
        [{"k": None}, True, False, 0.1 + 0.2],
        "text",
        None,
        7,
    ]
    for v in values:
        expected = json_loads(canonical_json_bytes(v))
        got = _as_read_back(v)
        assert json.dumps(got, sort_keys=False) == json.dumps(expected, sort_keys=False), v
