"""Every agreement figure of a release is recomputed from the release's own files (issue 16):
annotations.jsonl (the records with ``agreement_slot``), lexicon.json and the schema in
manifest.json, with scikit-learn, krippendorff and the paper's similarity functions, and the
same numbers come out. agreement.json counts exactly the released items it can be checked on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from adjudication.factories import gold_decide_all
from annotation.factories import MEME3W_HARMFUL, items_open
from exports.factories import annotate_all, meme3w_values
from exports.models import Release
from exports.selectors import release_dir
from exports.services import export_job_run, export_job_start
from metrics.boxes import enclosing_iou
from metrics.entity import f1_rel
from metrics.text import token_f1
from projects.models import Stage
from projects.services import item_stage_set

pytestmark = pytest.mark.django_db

SIMILARITY = {
    "entity": lambda a, b, lexicon: f1_rel(a, b, lexicon=lexicon),
    "span": lambda a, b, lexicon: token_f1(a, b),
    "boxes": lambda a, b, lexicon: enclosing_iou(a or [], b or []),
}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def visible(spec: dict, values: dict, by_name: dict) -> bool:
    cond = spec.get("visible_if")
    if cond is None:
        return True
    return visible(by_name[cond["field"]], values, by_name) and values.get(cond["field"]) in cond["in"]


def recompute(root: Path) -> dict:
    """{(field, figure key): (value, n)} from the files alone."""
    manifest = json.loads((root / "manifest.json").read_text())
    lexicon = json.loads((root / "lexicon.json").read_text())["entries"]
    fields = manifest["schema"]["fields"]
    by_name = {f["name"]: f for f in fields}
    units: dict[int, list[dict]] = {}
    for a in read_jsonl(root / "annotations.jsonl"):
        if a["agreement_slot"] is not None:
            units.setdefault(a["item_id"], []).append(a)
    pairs = [
        [r["values"] for r in sorted(rows, key=lambda r: r["agreement_slot"])] for _, rows in sorted(units.items())
    ]
    assert all(len(p) == 2 for p in pairs)  # two annotators per item in this project
    out = {}
    for spec in fields:
        name = spec["name"]
        scoped = [p for p in pairs if all(visible(spec, v, by_name) for v in p)]
        a = [p[0].get(name) for p in scoped]
        b = [p[1].get(name) for p in scoped]
        n = len(scoped)
        if spec["type"] == "choice":
            la, lb = ["<none>" if x is None else x for x in a], ["<none>" if x is None else x for x in b]
            labels = set(la) | set(lb)
            kappa = None if len(labels) < 2 else float(cohen_kappa_score(la, lb))
            out[(name, "kappa")] = (kappa, n)
            out[(name, "agreement")] = (float(np.mean([x == y for x, y in zip(la, lb)])) if n else None, n)
        else:
            sim = np.array([SIMILARITY[spec["type"]](x, y, lexicon) for x, y in zip(a, b)], dtype=float)
            out[(name, "mean")] = (float(sim.mean()) if n else None, n)
            for t in (0.5, 0.7, 0.75):
                out[(name, f"share_{t:g}")] = (float((sim >= t).mean()) if n else None, n)
    return out


@pytest.fixture
def disagreeing_release(project, dup_items, annotator_a, annotator_b, reviewer, lead) -> Release:
    """Annotator b disagrees on labels, entities, mentions and boxes of some items; one item
    with annotations is then excluded, so its annotations are not in the release."""
    items_open(dup_items)

    def values_for(item, user):
        v = meme3w_values(item)
        k = dup_items.index(item)
        if user == annotator_b:
            if k in (6, 8):
                v = dict(MEME3W_HARMFUL, text_mention=None)  # label disagreement
            if v["label"] == "harmful" and k % 3 == 0:
                v = {**v, "target_entity": "Zorgians", "visual_region": [[150, 120, 420, 560]]}
            if v["label"] == "harmful" and k % 4 == 1:
                v = {
                    **v,
                    "target_category": "religion and caste",
                    "text_mention": "Zorg" if "Zorg" in item.text else None,
                }
        return v

    annotate_all(project, [annotator_a, annotator_b], values_for=values_for)
    gold_decide_all(project, reviewer)
    item_stage_set(item=dup_items[11], stage=Stage.EXCLUDED)  # a lead took it out: not released
    job = export_job_start(project=project, user=lead, enqueue=False)
    release = export_job_run(job=job)
    job.refresh_from_db()
    assert release is not None, job.error
    return release


def test_every_agreement_figure_recomputes_from_the_release_files(disagreeing_release):
    root = release_dir(disagreeing_release)
    report = json.loads((root / "agreement.json").read_text())
    released = {r["item_id"] for r in read_jsonl(root / "records.jsonl")}
    compared = {a["item_id"] for a in read_jsonl(root / "annotations.jsonl") if a["agreement_slot"] is not None}
    assert compared <= released and report["n_items"] == len(compared) > 0
    mine = recompute(root)
    checked = 0
    for field in report["fields"]:
        for fig in field["figures"]:
            value, n = mine[(field["field"], fig["key"])]
            assert fig["n"] == n, (field["field"], fig["key"])
            if value is None:
                assert fig["value"] is None, (field["field"], fig["key"], fig["value"])
            else:
                assert fig["value"] == pytest.approx(value, abs=1e-6), (field["field"], fig["key"], fig["value"], value)
            checked += 1
    assert checked >= 10
    # the disagreements are there: not every figure is a perfect 1
    assert any(f["value"] is not None and f["value"] < 1 for fld in report["fields"] for f in fld["figures"])


def test_items_whose_annotations_are_not_released_are_not_counted(disagreeing_release, dup_items):
    root = release_dir(disagreeing_release)
    report = json.loads((root / "agreement.json").read_text())
    released = {r["item_id"] for r in read_jsonl(root / "records.jsonl")}
    # the exact pixel copy (s3) and the excluded item have annotations but are not released
    assert dup_items[3].pk not in released and dup_items[11].pk not in released
    anns = {a["item_id"] for a in read_jsonl(root / "annotations.jsonl")}
    assert anns == released
    # the datasheet counts exclusions by reason
    assert disagreeing_release.manifest["exclusions_by_reason"] == {"excluded by a lead (no reason given)": 1}
    assert "excluded by a lead (no reason given) | 1 |" in (root / "README.md").read_text()
    assert report["n_items"] == len(released)


def test_done_one_archive_over_rest_loads_in_every_tool_and_recomputes(
    disagreeing_release, researcher, tmp_path, monkeypatch
):
    """Issue 16, "done means": download the release over REST as one archive and load it with
    datasets, mlcroissant, pycocotools, pandas and pyarrow; recompute its agreement figures."""
    import hashlib
    import io
    import zipfile

    import datasets
    import mlcroissant as mlc
    import pandas as pd
    import pyarrow.parquet as pq
    from pycocotools.coco import COCO
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    release = disagreeing_release
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=researcher)[0].key}")
    detail = client.get(f"/api/projects/p1/releases/{release.number}/").json()
    response = client.get(detail["archive"]["url"])
    assert response.status_code == 200
    data = b"".join(response.streaming_content)
    assert hashlib.sha256(data).hexdigest() == detail["archive"]["sha256"] and len(data) == detail["archive"]["bytes"]
    zipfile.ZipFile(io.BytesIO(data)).extractall(tmp_path / "download")
    root = tmp_path / "download" / f"p1-v{release.number}"
    manifest = json.loads((root / "manifest.json").read_text())
    assert hashlib.sha256((root / "manifest.json").read_bytes()).hexdigest() == detail["manifest_sha256"]
    for name, meta in manifest["files"].items():  # every file arrived intact
        assert hashlib.sha256((root / name).read_bytes()).hexdigest() == meta["sha256"], name
    counts = manifest["counts"]["by_split"]
    assert all(counts[s] > 0 for s in ("train", "val", "test"))

    ds = datasets.load_dataset(str(root), cache_dir=str(tmp_path / "hf"))
    assert {s: ds[s].num_rows for s in ds} == {
        "train": counts["train"],
        "validation": counts["val"],
        "test": counts["test"],
    }
    assert isinstance(ds["train"].features["image_data"], datasets.Image)

    croissant = mlc.Dataset(jsonld=str(root / "croissant.json"))
    assert len(list(croissant.records(record_set="records"))) == sum(counts.values())

    for split in ("train", "val", "test"):
        coco = COCO(str(root / f"coco/{split}.json"))
        assert len(coco.imgs) == counts[split]

    df = pd.read_json(root / "records.jsonl", lines=True)
    table = pq.read_table(root / "records.parquet")
    assert df["item_id"].tolist() == table.column("item_id").to_pylist()
    anns = pd.read_parquet(root / "annotations.parquet")
    assert len(anns) == manifest["counts"]["annotations"]

    report = json.loads((root / "agreement.json").read_text())
    mine = recompute(root)
    for field in report["fields"]:
        for fig in field["figures"]:
            value, n = mine[(field["field"], fig["key"])]
            assert fig["n"] == n
            assert (fig["value"] is None and value is None) or fig["value"] == pytest.approx(value, abs=1e-6)
