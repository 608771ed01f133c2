"""exports.build.tables.ParquetFamily: the Parquet files a release streams from its rows are
byte for byte those of the straightforward path (jsonl_to_parquet / split_twin re-reading the
JSONL files), whatever the rows hold. No database."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exports.build import tables
from exports.build.tables import (
    IMAGE_DATA_TYPE,
    ParquetFamily,
    SplitOptions,
    jsonl_to_parquet,
    split_twin,
)
from exports.writers import JsonlWriter

SPLITS = ("train", "val", "test")
COLUMNS = ["id", "split", "name", "gold", "image", "meta"]
GOLD = pa.struct([("label", pa.string()), ("boxes", pa.list_(pa.list_(pa.int64())))])
IMAGE = pa.struct([("file", pa.string()), ("width", pa.int32())])
DECLARED = {"id": pa.int64(), "split": pa.string(), "name": pa.string(), "gold": GOLD, "image": IMAGE}


def build(tmp_path, rows, *, declared=DECLARED, options=None, columns=COLUMNS):
    """Both paths over ``rows``: {file: (streamed bytes, straightforward bytes)} and the results."""
    dest = tmp_path / "release"
    dest.mkdir(parents=True)
    whole = JsonlWriter(dest / "whole.jsonl")
    per_split = {s: JsonlWriter(dest / f"{s}.jsonl") for s in SPLITS}
    family = ParquetFamily(
        whole=(dest / "whole.jsonl", dest / "whole.parquet"),
        splits={s: (dest / f"{s}.jsonl", dest / f"{s}.parquet") for s in SPLITS},
        columns=columns,
        declared=declared,
        split_options=options,
    )
    for row in rows:
        per_split[row["split"]].write_line(whole.write(row))
        family.add(row, row["split"])
    whole.close()
    for w in per_split.values():
        w.close()
    streamed = family.close()
    assert not [p for p in tmp_path.iterdir() if ".spool-" in p.name], "the spool is removed"
    ref = tmp_path / "reference"
    ref.mkdir()
    o = options or SplitOptions()
    expected = {
        "whole": jsonl_to_parquet(dest / "whole.jsonl", ref / "whole.parquet", columns=columns, declared=declared)
    }
    for s in SPLITS:
        expected[s] = split_twin(
            dest / f"{s}.jsonl",
            ref / f"{s}.parquet",
            whole=expected["whole"],
            columns=columns,
            extra=o.extra,
            image_columns=o.image_columns,
            batch_rows=o.batch_rows,
            group_bytes=o.group_bytes,
        )
    files = {
        name: ((dest / f"{name}.parquet").read_bytes(), (ref / f"{name}.parquet").read_bytes())
        for name in ["whole", *SPLITS]
    }
    for name in files:
        assert streamed[name].digest == expected[name].digest, name
        assert streamed[name].json_text_columns == expected[name].json_text_columns
        assert streamed[name].rows == expected[name].rows
        assert streamed[name].schema == expected[name].schema
    return files, streamed


def row(i: int, **over) -> dict:
    split = SPLITS[(i * 7) % 10 % 3] if i % 5 else "train"
    out = {
        "id": i,
        "split": split,
        "name": f"item {i}",
        "gold": {"label": "harmful" if i % 3 else "not harmful", "boxes": [[i, i + 1, i + 2, i + 3]] * (i % 3)},
        "image": {"width": 100 + i, "file": f"images/{i}.png" if i % 4 == 0 else None},
        # free form: keys in any order, some missing, ints and floats in one key, nested objects
        "meta": {"z": i, "a": {"y": 1.5 if i % 2 else 2, "b": [1, 2]}} if i % 3 else {"k": "text", "z": i},
    }
    out.update(over)
    return out


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    # batch boundaries inside the files and inside the splits (the types unify across batches)
    monkeypatch.setattr(tables, "BATCH_ROWS", 4)
    monkeypatch.setattr(tables, "ROW_GROUP_ROWS", 5)


def test_inferred_columns_unify_over_batches_and_splits(tmp_path):
    files, streamed = build(tmp_path, [row(i) for i in range(31)])
    for name, (got, want) in files.items():
        assert got == want, name
    meta = streamed["whole"].schema.field("meta").type
    assert pa.types.is_struct(meta) and sorted(f.name for f in meta) == ["a", "k", "z"]


def test_columns_no_type_can_hold_are_json_text_in_every_file(tmp_path):
    rows = [row(i) for i in range(13)] + [row(13, meta={"z": "not a number"}), row(14, meta={"z": [1]})]
    files, streamed = build(tmp_path, rows)
    assert streamed["whole"].json_text_columns == ["meta"]
    for name, (got, want) in files.items():
        assert got == want, name


def test_a_declared_type_that_does_not_fit_takes_the_straightforward_path(tmp_path):
    # a references workflow: a list of labels where the schema's type is one text
    rows = [row(i, gold={"label": ["a", "b"][: i % 3], "boxes": []}) for i in range(10)]
    files, streamed = build(tmp_path / "lists", rows)
    gold = streamed["whole"].schema.field("gold").type
    assert pa.types.is_list(gold.field(0).type)
    for name, (got, want) in files.items():
        assert got == want, name
    # the same after batches that fit: the column then holds values no one type can hold
    rows = [row(i) for i in range(9)] + [row(9, gold={"label": ["a", "b"], "boxes": []})]
    files, streamed = build(tmp_path / "mixed", rows)
    assert streamed["whole"].json_text_columns == ["gold"]
    for name, (got, want) in files.items():
        assert got == want, name


def test_always_empty_objects_an_empty_split_and_a_split_of_its_own_types(tmp_path):
    # meta is {} everywhere but in one val row: the train split's own pass sees only empty objects
    rows = [row(i, split="train", meta={}) for i in range(6)] + [row(6, split="val", meta={"only": {"here": 1}})]
    files, streamed = build(tmp_path, rows)
    assert pq.ParquetFile(tmp_path / "release" / "test.parquet").num_row_groups == 0
    for name, (got, want) in files.items():
        assert got == want, name


def image_options(root, **kwargs) -> SplitOptions:
    """Split files with the images under ``root`` embedded (a release's per-split records)."""

    def image_data(r: dict):
        name = (r.get("image") or {}).get("file")
        return {"bytes": (root / name).read_bytes(), "path": name} if name else None

    return SplitOptions(
        extra={"image_data": (IMAGE_DATA_TYPE, image_data)},
        extra_inputs=("image",),
        image_columns=("image_data",),
        **kwargs,
    )


def test_row_groups_with_images_end_at_a_byte_budget_in_both_paths(tmp_path):
    """Files with image bytes: a row group ends after ``batch_rows`` rows or at the row whose
    image brings it to ``group_bytes`` (one big image is a group of its own), the streamed
    file byte for byte the straightforward one; without images, groups of ``batch_rows``."""
    (tmp_path / "images").mkdir()
    sizes = {}
    for i in range(0, 200, 4):
        sizes[i] = 1 + (i * 37) % 23 if i != 40 else 500  # one image over the whole budget
        (tmp_path / "images" / f"{i}.png").write_bytes(bytes([i % 256]) * sizes[i])

    options = image_options(tmp_path, batch_rows=9, group_bytes=30)
    rows = [row(i) for i in range(200)]
    files, _ = build(tmp_path, rows, options=options)
    for name, (got, want) in files.items():
        assert got == want, name
    for split in SPLITS:
        expected, n, total = [], 0, 0
        for r in rows:
            if r["split"] != split:
                continue
            n, total = n + 1, total + sizes.get(r["id"], 0)
            if n == 9 or total >= 30:
                expected.append(n)
                n = total = 0
        expected += [n] if n else []
        meta = pq.ParquetFile(tmp_path / "release" / f"{split}.parquet").metadata
        got = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        assert got == expected and min(got) < 9, split  # some groups cut by bytes
    whole = pq.ParquetFile(tmp_path / "release" / "whole.parquet").metadata
    per_group = [whole.row_group(g).num_rows for g in range(whole.num_row_groups)]
    assert set(per_group[:-1]) == {tables.ROW_GROUP_ROWS}  # no images: groups of ROW_GROUP_ROWS rows
    assert tables.extra_bytes({"bytes": b"abc", "path": "x"}) == 3 and tables.extra_bytes(None) == 0


def test_split_extras_are_computed_per_row_in_their_row_groups(tmp_path):
    (tmp_path / "images").mkdir()
    for i in range(0, 40, 4):
        (tmp_path / "images" / f"{i}.png").write_bytes(bytes([i]) * (i + 1))

    options = image_options(tmp_path, batch_rows=3)
    files, streamed = build(tmp_path, [row(i) for i in range(40)], options=options)
    for name, (got, want) in files.items():
        assert got == want, name
    assert streamed["train"].schema.names[-1] == "image_data"
    back = pq.read_table(tmp_path / "release" / "train.parquet").to_pylist()
    assert any(r["image_data"] for r in back) and all(
        (r["image_data"] is None) == (r["image"]["file"] is None) for r in back
    )


def test_no_rows_at_all(tmp_path):
    files, _ = build(tmp_path, [])
    for name, (got, want) in files.items():
        assert got == want, name


def test_every_split_has_the_whole_files_types_also_keys_it_never_holds(tmp_path):
    # meta.e is always an empty object (a null column), and only val rows have meta.v: a split
    # deciding its own types would leave v out of train's (Hugging Face then refuses the config)
    rows = [row(i, split="train", meta={"e": {}, "n": i}) for i in range(6)]
    rows += [row(6 + i, split="val", meta={"e": {}, "n": i, "v": "only here"}) for i in range(3)]
    files, streamed = build(tmp_path, rows)
    for name, (got, want) in files.items():
        assert got == want, name
    whole = streamed["whole"].schema
    meta = whole.field("meta").type
    assert [f.name for f in meta] == ["e", "n", "v"] and pa.types.is_null(meta.field("e").type)
    for split in SPLITS:
        schema = streamed[split].schema
        assert [(f.name, f.type) for f in schema] == [(f.name, f.type) for f in whole], split
    train = pq.read_table(tmp_path / "release" / "train.parquet").column("meta").to_pylist()
    assert train == [{"e": None, "n": i, "v": None} for i in range(6)]


def in_parts(tmp_path, rows, cuts):
    """The files of families given ``rows`` cut at ``cuts``, each part detached, their JSONL
    files joined and the last family closed with every part (exports.build.annotations:
    a release's candidate parts): {name: bytes}."""
    dest = tmp_path / "parted"
    dest.mkdir(parents=True)

    def family(folder):
        return ParquetFamily(
            whole=(folder / "whole.jsonl", folder / "whole.parquet"),
            splits={s: (folder / f"{s}.jsonl", folder / f"{s}.parquet") for s in SPLITS},
            columns=COLUMNS,
            declared=DECLARED,
        )

    bounds = [0, *cuts, len(rows)]
    parts, folders = [], []
    for k in range(len(bounds) - 1):
        folder = dest / f"part-{k}"
        folder.mkdir()
        whole = JsonlWriter(folder / "whole.jsonl")
        per_split = {s: JsonlWriter(folder / f"{s}.jsonl") for s in SPLITS}
        fam = family(folder)
        for r in rows[bounds[k] : bounds[k + 1]]:
            per_split[r["split"]].write_line(whole.write(r))
            fam.add(r, r["split"])
        whole.close()
        for w in per_split.values():
            w.close()
        parts.append(fam.detach())
        folders.append(folder)
    for name in ["whole", *SPLITS]:
        (dest / f"{name}.jsonl").write_bytes(b"".join((f / f"{name}.jsonl").read_bytes() for f in folders))
    results = family(dest).close_with(parts)
    assert not [p for p in dest.iterdir() if ".spool-" in p.name], "every part's spool is removed"
    return {name: (dest / f"{name}.parquet").read_bytes() for name in ["whole", *SPLITS]}, results


@pytest.mark.parametrize("cuts", [[3], [1, 2, 7], [0, 0, 10]])
def test_parts_closed_together_are_the_files_of_one_family(tmp_path, cuts):
    rows = [row(i) for i in range(10)]
    files, _ = build(tmp_path / "one", rows)
    parted, results = in_parts(tmp_path / "parts", rows, cuts)
    assert {name: got for name, (got, _) in files.items()} == parted
    assert results["whole"].rows == 10
    # a part whose rows take the straightforward path takes the whole family there
    rows[8] = row(8, gold={"label": ["a", "b"], "boxes": []})
    files, streamed = build(tmp_path / "one-mixed", rows)
    parted, results = in_parts(tmp_path / "parts-mixed", rows, cuts)
    assert {name: got for name, (got, _) in files.items()} == parted
    assert results["whole"].json_text_columns == streamed["whole"].json_text_columns == ["gold"]
