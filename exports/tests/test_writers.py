"""exports.writers: canonical JSONL, deterministic Parquet, COCO boxes. No database."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from exports import writers
from exports.writers import (
    CocoWriter,
    JsonlWriter,
    ParquetRecordsWriter,
    box_to_pixels,
    canonical_json,
    file_digest,
    finite,
)
from projects.presets import AHA_SCHEMA, MEME3W_SCHEMA

FIELDS = MEME3W_SCHEMA["fields"]


def record(i: int) -> dict:
    harmful = i % 3 == 0
    return {
        "item_id": i,
        "source_id": f"s{i}",
        "source_dataset": "t",
        "import_key": f"k{i}",
        "text": f"Zorg é {i}",
        "title": "",
        "language": "en",
        "domain": "",
        "metadata": {"b": 1, "a": [i]},
        "split": "train",
        "near_duplicate_group": i,
        "image": {
            "file": None,
            "format": "JPEG",
            "height": 10,
            "phash": "0" * 16,
            "pixel_hash": "a" * 64,
            "redistributable": False,
            "sha256": "b" * 64,
            "width": 20,
        },
        "gold": {
            "label": "harmful" if harmful else "non-harmful",
            "target_category": "gender" if harmful else None,
            "target_entity": "x" if harmful else None,
            "text_mention": None,
            "visual_region": [[1, 2, 300, 400]] if harmful else [],
        },
        "provenance": {"label": {"source": "identical"}},
        "gold_revision": 1,
        "schema_version": 1,
        "lexicon_version": None,
    }


def test_canonical_json_sorts_keys_keeps_unicode_and_refuses_nan():
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})
    assert finite({"x": [float("inf"), 1.5]}) == {"x": [None, 1.5]}


def test_jsonl_digest_matches_the_file_and_pandas_reads_it(tmp_path):
    w = JsonlWriter(tmp_path / "r.jsonl", flush_lines=7)
    for i in range(25):
        w.write(record(i))
    digest = w.close()
    assert digest == file_digest(tmp_path / "r.jsonl")
    df = pd.read_json(tmp_path / "r.jsonl", lines=True)
    assert len(df) == 25 and df["item_id"].tolist() == list(range(25))
    assert df.loc[3, "gold"]["visual_region"] == [[1, 2, 300, 400]]


def _parquet(path, n, batch):
    w = ParquetRecordsWriter(path, FIELDS, batch_rows=batch)
    for i in range(n):
        w.write(record(i))
    return w.close()


def test_parquet_is_byte_identical_across_runs_and_round_trips(tmp_path):
    a = _parquet(tmp_path / "a.parquet", 250, 100)
    b = _parquet(tmp_path / "b.parquet", 250, 100)
    assert a == b and (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    pf = pq.ParquetFile(tmp_path / "a.parquet")
    assert pf.metadata.num_row_groups == 3  # written in row-group batches
    table = pq.read_table(tmp_path / "a.parquet")
    rows = table.to_pylist()
    assert rows[3]["gold"]["visual_region"] == [[1, 2, 300, 400]]
    assert rows[4]["gold"]["target_category"] is None
    assert json.loads(rows[0]["metadata"]) == {"a": [0], "b": 1}
    assert table.schema.field("gold").type.get_field_index("visual_region") == 4


def test_parquet_types_follow_the_schema(tmp_path):
    w = ParquetRecordsWriter(tmp_path / "aha.parquet", AHA_SCHEMA["fields"])
    rec = record(1)
    rec["gold"] = {
        "is_hateful": "Hateful",
        "hateful_type": ["Mocking"],
        "targeted_categories": ["race"],
        "non_hateful_type": [],
    }
    w.write(rec)
    w.close()
    gold = pq.read_table(tmp_path / "aha.parquet").to_pylist()[0]["gold"]
    assert gold == rec["gold"]


def test_box_to_pixels():
    assert box_to_pixels([100, 200, 600, 1000], 640, 480) == [64.0, 96.0, 320.0, 384.0]


def test_coco_writer_streams_images_and_pixel_boxes(tmp_path):
    coco = CocoWriter(tmp_path / "coco.json", categories=["gender", "religion"], info={"k": 1})
    coco.add(
        image={"id": 5, "width": 200, "height": 100, "file_name": "a.jpg"},
        boxes=[[0, 0, 500, 1000], [500, 500, 1000, 1000]],
        category="religion",
    )
    coco.add(image={"id": 6, "width": 10, "height": 10, "file_name": "b.jpg"}, boxes=[], category=None)
    digest = coco.close()
    assert digest == file_digest(tmp_path / "coco.json")
    data = json.loads((tmp_path / "coco.json").read_text())
    assert list(data) == ["annotations", "categories", "images", "info", "licenses"]
    assert [i["id"] for i in data["images"]] == [5, 6]
    assert data["categories"] == [
        {"id": 1, "name": "gender", "supercategory": "target"},
        {"id": 2, "name": "religion", "supercategory": "target"},
    ]
    first, second = data["annotations"]
    assert first["bbox"] == [0.0, 0.0, 100.0, 100.0] and first["category_id"] == 2 and first["area"] == 10000.0
    assert second["bbox"] == [100.0, 50.0, 100.0, 50.0] and second["bbox_normalized_1000"] == [500, 500, 1000, 1000]
    assert not (tmp_path / "coco.json.images.tmp").exists()


def test_coco_writer_gathers_its_writes_into_the_same_bytes(tmp_path, monkeypatch):
    """CocoWriter writes ~1 MB at a time: with a tiny threshold (a write per few pieces) and
    with none reached, the file is the same, and its digest that of the bytes on disk."""

    def write(path):
        coco = CocoWriter(path, categories=["gender"], info={"k": 1})
        for i in range(60):
            boxes = [[i, i, 500 + i, 600 + i]] * (i % 3)
            coco.add(
                image={"id": i, "width": 100 + i, "height": 80, "file_name": f"{i}.jpg"}, boxes=boxes, category="gender"
            )
        return coco.close()

    whole = write(tmp_path / "whole.json")
    monkeypatch.setattr(writers, "COCO_FLUSH_BYTES", 64)
    small = write(tmp_path / "small.json")
    assert (tmp_path / "whole.json").read_bytes() == (tmp_path / "small.json").read_bytes()
    assert whole == small == file_digest(tmp_path / "small.json")
    data = json.loads((tmp_path / "small.json").read_text())
    assert [i["id"] for i in data["images"]] == list(range(60)) and len(data["annotations"]) == 60


def _hostile_values(rng):
    """Values a release line can hold, including the ones where orjson's text differs."""
    floats = [0.0, -0.0, 0.1, 1e-05, 1.234e-05, 9.99e-05, 1e-06, 5e-324, 0.0001, 1e15, 1e16, 1.5e16, 1e22, 2.5, 1 / 3]
    strings = [
        "",
        "plain",
        "é漢字",
        "\u2028\u2029",
        "\x00\x1f\x7f",
        'quote " back \\ slash /',
        "re-explain 5e-3",
        "0.00001",
    ]
    kinds = [
        lambda: float(rng.choice(floats)),
        lambda: str(rng.choice(strings)),
        lambda: int(rng.integers(-(2**62), 2**62)),
        lambda: 2**70,
        lambda: None,
        lambda: bool(rng.integers(0, 2)),
    ]
    return kinds


def test_orjson_path_is_byte_identical_to_the_stdlib_encoder():
    """JsonlWriter writes through orjson where its text is the stdlib's and falls back
    otherwise: random records with small floats, huge ints, control characters, non-string
    keys and nested containers encode to exactly canonical_json(...).encode()."""
    import numpy as np

    from exports.writers import canonical_json_bytes

    rng = np.random.default_rng(5)
    kinds = _hostile_values(rng)

    def value(depth=0):
        r = rng.random()
        if depth < 3 and r < 0.2:
            return [value(depth + 1) for _ in range(int(rng.integers(0, 4)))]
        if depth < 3 and r < 0.4:
            keys = ["b", "a", "é", "Z", "漢", "a1", "A"]
            out = {str(rng.choice(keys)) + str(i): value(depth + 1) for i in range(int(rng.integers(0, 4)))}
            if rng.random() < 0.05:
                return {7: "int keys", 3: value(depth + 1)}  # the stdlib writes them as strings
            return out
        return kinds[int(rng.integers(0, len(kinds)))]()

    checked = 0
    for _ in range(3000):
        record = {"id": int(rng.integers(0, 10**6)), "v": value()}
        assert canonical_json_bytes(record) == canonical_json(record).encode(), record
        checked += 1
    assert checked == 3000
    # NaN/Infinity (no database JSON holds them) are written as null, like finite() does
    assert canonical_json_bytes({"x": float("nan"), "y": [float("inf")]}) == b'{"x":null,"y":[null]}'


def test_json_loads_reads_what_orjson_refuses():
    from exports.writers import json_loads

    assert json_loads(b'{"id": 123456789012345678901234567890}') == {"id": 123456789012345678901234567890}
    assert json_loads('{"t": "漢字"}') == {"t": "漢字"}
    assert json_loads(b'{"n": 9223372036854775807, "f": 0.30000000000000004}') == {
        "n": 9223372036854775807,
        "f": 0.30000000000000004,
    }
    assert json_loads(b'{"n": -12345678901234567890123}') == {"n": -12345678901234567890123}
