"""A release is taken as it is by the tools researchers use (issue 16): Hugging Face
``datasets`` (the card's configs and features), mlcroissant, pycocotools, pandas and pyarrow;
per-split JSONL and Parquet hold the same values, nested columns nested."""

from __future__ import annotations

import json
import os

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pyarrow.parquet as pq
import pytest
import yaml

from annotation.factories import MEME3W_HARMFUL, MEME3W_NOT_HARMFUL
from candidates.factories import candidates_create
from exports.build.tables import values_equal
from exports.models import ReleaseSettings
from exports.selectors import release_dir
from exports.services import export_job_run, export_job_start, near_duplicates_detect
from projects.models import Item

pytestmark = pytest.mark.django_db
SPLITS = ("train", "val", "test")


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def release(project, dup_items, annotator_a, annotator_b, lead):
    # free-form metadata of several shapes: must become one nested Parquet type
    for k, item in enumerate(dup_items):
        meta = {"source": {"site": "forum", "thread": k}, "tags": ["a", "b"][: k % 3]}
        if k % 2:
            meta["score"] = 1.5
        Item.objects.filter(pk=item.pk).update(metadata=meta)
    from exports.factories import gold_create

    gold_create(project, dup_items, [annotator_a, annotator_b])
    candidates_create(dup_items[0], [MEME3W_HARMFUL, MEME3W_NOT_HARMFUL, MEME3W_HARMFUL])
    ReleaseSettings.objects.create(
        project=project,
        pretty_name="Zorg memes",
        license="cc-by-4.0",
        license_url="https://creativecommons.org/licenses/by/4.0/",
        creators="Ada Lovelace (Analytical Engine Lab)\nAlan Turing (Bletchley)",
        funding="Grant 42",
        motivation="To measure harmful memes about Planet Zorg.",
        intended_uses="Research on harmful meme detection.",
        prohibited_uses="Profiling individuals.",
        contact="data@example.org",
        citation="@misc{zorg, title={Zorg memes}}",
        languages="en",
    )
    near_duplicates_detect(project=project)
    job = export_job_start(project=project, user=lead, enqueue=False)
    rel = export_job_run(job=job)
    job.refresh_from_db()
    assert rel is not None, job.error
    return rel


def test_per_split_parquet_has_the_jsonl_values_in_nested_columns(release):
    root = release_dir(release)
    total = 0
    for kind in ("records", "annotations", "candidates"):
        for split in SPLITS:
            rows = read_jsonl(root / f"{kind}/{split}.jsonl")
            table = pq.read_table(root / f"{kind}/{split}.parquet")
            assert table.num_rows == len(rows)
            back = table.to_pylist()
            for a, b in zip(rows, back):
                assert {r["split"] for r in rows} <= {split}
                for key, value in a.items():
                    assert values_equal(value, b[key]), (kind, split, key, value, b[key])
            total += len(rows)
            if kind == "records":
                schema = table.schema
                for name in ("metadata", "provenance", "image", "gold"):
                    assert str(schema.field(name).type).startswith("struct<"), (name, schema.field(name).type)
                assert str(schema.field("metadata").type.field("tags").type).startswith("list<")
                assert b"huggingface" in schema.metadata
            if kind == "annotations":
                assert str(table.schema.field("values").type).startswith("struct<")
    assert total == 11 + 22 + 3
    assert release.manifest["json_text_columns"] == []
    # the whole-release files are the union of the splits
    whole = pq.read_table(root / "records.parquet")
    assert whole.num_rows == 11 and sorted(whole.column("split").unique().to_pylist()) == sorted(
        s for s in SPLITS if release.manifest["counts"]["by_split"][s]
    )


def test_annotations_carry_order_time_and_versions(release, project):
    root = release_dir(release)
    anns = read_jsonl(root / "annotations.jsonl")
    # Each annotation names the guideline version it was saved under (issue 12 records it).
    guideline_version = release.manifest["guideline"]["project_version"]
    assert guideline_version == project.guideline_version
    for a in anns:
        assert a["annotator"].startswith("annotator-")
        assert a["submission_order"] in (1, 2) and a["agreement_slot"] == a["submission_order"]
        assert a["submitted_at"].endswith("Z") and a["schema_version"] == project.schema_version
        assert a["guideline_version"] == guideline_version
    by_item = {}
    for a in anns:
        by_item.setdefault(a["item_id"], []).append(a)
    for rows in by_item.values():
        assert sorted(r["submission_order"] for r in rows) == [1, 2]
        first, second = sorted(rows, key=lambda r: r["submission_order"])
        assert first["submitted_at"] <= second["submitted_at"]
    assert (root / "guideline.md").read_text() == (project.guideline.rstrip() + "\n" if project.guideline else "")
    prompt = (root / "prompt.txt").read_text()
    assert "ANALYSIS STEPS" in prompt and release.manifest["prompt"]["version"]


def test_coco_per_split_loads_in_pycocotools(release):
    from pycocotools.coco import COCO

    root = release_dir(release)
    records = {r["item_id"]: r for r in read_jsonl(root / "records.jsonl")}
    seen = 0
    for split in SPLITS:
        coco = COCO(str(root / f"coco/{split}.json"))
        assert {lic["id"] for lic in coco.dataset["licenses"]} == {0, 1}
        assert coco.dataset["licenses"][0]["name"] == "cc-by-4.0" or "cc-by" in coco.dataset["licenses"][0]["name"]
        for image_id, image in coco.imgs.items():
            seen += 1
            rec = records[image_id]
            assert rec["split"] == split
            assert image["file_name"] == f"{rec['image']['sha256']}.jpg" and "sha256:" not in image["file_name"]
            assert (root / "images" / image["file_name"]).is_file() == rec["image"]["redistributable"]
            assert image["license"] == (1 if rec["image"]["redistributable"] else 0)
            anns = coco.loadAnns(coco.getAnnIds(imgIds=[image_id]))
            assert len(anns) == len(rec["gold"]["visual_region"])
            for ann in anns:
                x, y, w, h = ann["bbox"]
                assert ann["segmentation"] == [
                    [x, y, round(x + w, 2), y, round(x + w, 2), round(y + h, 2), x, round(y + h, 2)]
                ]
                mask = coco.annToMask(ann)
                assert mask.shape == (image["height"], image["width"])
                assert abs(int(mask.sum()) - w * h) <= 2 * (w + h) + 4  # the box's area, to its rasterized edge
    assert seen == 11


def test_load_dataset_gives_typed_splits_and_images(release, tmp_path):
    import datasets

    root = release_dir(release)
    readme = (root / "README.md").read_text()
    assert readme.startswith("---\n")
    meta = yaml.safe_load(readme.split("---\n")[1])
    assert meta["license"] == "cc-by-4.0" and meta["language"] == ["en"] and meta["size_categories"] == ["n<1K"]
    assert meta["pretty_name"] == "Zorg memes" and "object-detection" in meta["task_categories"]
    assert [c["config_name"] for c in meta["configs"]] == ["records", "annotations", "candidates"]
    for section in (
        "## Motivation",
        "## Composition",
        "## Collection process",
        "## Preprocessing",
        "## Uses",
        "## Distribution",
        "## Maintenance",
        "Content warning",
        "Grant 42",
        "Profiling individuals",
        "Ada Lovelace",
        "data@example.org",
        "@misc{zorg",
    ):
        assert section in readme, section

    ds = datasets.load_dataset(str(root), cache_dir=str(tmp_path / "hf"))
    assert set(ds) == {"train", "validation", "test"}
    counts = release.manifest["counts"]["by_split"]
    assert [ds[s].num_rows for s in ("train", "validation", "test")] == [counts[s] for s in SPLITS]
    features = ds["train"].features
    assert isinstance(features["image_data"], datasets.Image)
    assert features["item_id"].dtype == "int64" and features["gold"]["label"].dtype == "string"
    assert isinstance(features["metadata"]["tags"], datasets.List)
    rows = [r for s in ds for r in ds[s]]
    shipped = [r for r in rows if r["image"]["redistributable"]]
    assert shipped and all(r["image_data"].size == (r["image"]["width"], r["image"]["height"]) for r in shipped)
    assert all(r["image_data"] is None for r in rows if not r["image"]["redistributable"])

    ann = datasets.load_dataset(str(root), "annotations", cache_dir=str(tmp_path / "hf"))
    assert sum(ann[s].num_rows for s in ann) == 22
    assert ann["train"].features["submission_order"].dtype == "int32"
    cand = datasets.load_dataset(str(root), "candidates", cache_dir=str(tmp_path / "hf"))
    assert sum(cand[s].num_rows for s in cand) == 3


def test_croissant_validates_and_loads_records(release):
    import mlcroissant as mlc

    root = release_dir(release)
    dataset = mlc.Dataset(jsonld=str(root / "croissant.json"))
    doc = json.loads((root / "croissant.json").read_text())
    assert doc["rai:dataAnnotationPlatform"] == ["Concord"] and doc["license"].startswith("https://creativecommons")
    records = list(dataset.records(record_set="records"))
    assert len(records) == 11
    by_id = {r["records/item_id"]: r for r in records}
    expected = {r["item_id"]: r for r in read_jsonl(root / "records.jsonl")}
    assert set(by_id) == set(expected)
    for item_id, rec in expected.items():
        got = by_id[item_id]
        assert got["records/split"].decode() == rec["split"]
        assert got["records/gold_label"].decode() == rec["gold"]["label"]
    assert len(list(dataset.records(record_set="annotations"))) == 22
