"""A multi-round workflow (MemeCap) released: references kept as lists of gold values with
their pseudonymous annotators, the splits the workflow pinned kept, flagged items counted by
reason in the datasheet, and the per-split files still load in pyarrow and datasets."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from annotation.factories import items_open, ready
from annotation.services import assignment_claim_next
from exports.build.tables import values_equal
from exports.selectors import release_dir
from exports.services import export_job_run, export_job_start
from projects.factories import items_create, project_with_members
from projects.models import Item
from workflow.services import annotation_submit, item_flag

pytestmark = pytest.mark.django_db

LITERAL = {"image_caption": "Tom cat is shaking hands with two small cats and smiling"}


def meme(i: int) -> dict:
    return {"metaphors": [{"vehicle": "Tom cat", "meaning": f"the poster {i}"}], "meme_caption": f"caption {i}"}


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def memecap_release(lead, make_user, tmp_path):
    people = {name: make_user(name) for name in ("lit1", "lit2", "cap1", "cap2", "cap3")}
    project = project_with_members("mc", preset="memecap", lead=[lead], annotator=list(people.values()))
    for u in people.values():
        ready(u, project)
    items = items_create(project, tmp_path / "src", 12)
    items_open(items)
    flagged = False
    n = 0
    for _ in range(4):  # rounds of everyone working their queue until nothing is left
        for name, user in people.items():
            while (result := assignment_claim_next(annotator=user, project=project)).annotation is not None:
                a = result.annotation
                if not flagged and name == "lit1":
                    item_flag(annotator=user, item=a.item, reason="hateful", note="slur in the picture")
                    flagged = True
                    continue
                values = LITERAL if a.stage == 0 else meme(n)
                annotation_submit(annotator=user, item=a.item, values=values, version=a.version)
                n += 1
    job = export_job_start(project=project, user=lead, enqueue=False)
    release = export_job_run(job=job)
    job.refresh_from_db()
    assert release is not None, job.error
    return project, release


def test_memecap_release(memecap_release, tmp_path, monkeypatch):
    project, release = memecap_release
    root = release_dir(release)
    records = read_jsonl(root / "records.jsonl")
    assert len(records) == 11  # twelve items, one flagged out
    pinned = dict(Item.objects.filter(project=project).values_list("id", "split"))
    for r in records:
        assert r["split"] == pinned[r["item_id"]], "a release keeps the split the workflow pinned"
        captions = r["gold"]["meme_caption"]
        assert isinstance(captions, list) and len(captions) == (2 if r["split"] == "test" else 1)
        prov = r["provenance"]["meme_caption"]
        assert "annotations" not in prov and len(prov["annotators"]) == len(captions)
        assert all(p.startswith("annotator-") for p in prov["annotators"])
    assert release.manifest["exclusions_by_reason"] == {"hateful: slur in the picture": 1}
    assert "hateful: slur in the picture | 1 |" in (root / "README.md").read_text()
    for split in ("train", "val", "test"):
        rows = read_jsonl(root / f"records/{split}.jsonl")
        table = pq.read_table(root / f"records/{split}.parquet")
        assert table.num_rows == len(rows)
        if rows:
            gold = table.schema.field("gold").type
            captions, metaphors = gold.field("meme_caption").type, gold.field("metaphors").type
            assert pa.types.is_list(captions) and pa.types.is_string(captions.value_type)
            assert pa.types.is_list(metaphors) and pa.types.is_list(metaphors.value_type)
            assert pa.types.is_struct(metaphors.value_type.value_type)
        for a, b in zip(rows, table.to_pylist()):
            assert all(values_equal(a[k], b[k]) for k in a)

    import datasets

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    ds = datasets.load_dataset(str(root), cache_dir=str(tmp_path / "hf"))
    assert sum(ds[s].num_rows for s in ds) == 11

    import mlcroissant as mlc

    rows = list(mlc.Dataset(jsonld=str(root / "croissant.json")).records(record_set="records"))
    assert len(rows) == 11
    by_id = {r["records/item_id"]: r for r in rows}
    for r in records:
        assert [c.decode() for c in by_id[r["item_id"]]["records/gold_meme_caption"]] == r["gold"]["meme_caption"]
