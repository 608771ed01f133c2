"""Building and publishing releases: contents, pseudonyms, determinism, atomic failure, diffs."""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime, timedelta, timezone

import pandas as pd
import pyarrow.parquet as pq
import pytest

from adjudication.factories import gold_decide_all
from adjudication.services import adjudication_next, gold_decide, gold_send_back
from annotation.factories import MEME3W_HARMFUL, MEME3W_NOT_HARMFUL
from annotation.models import Annotation
from candidates.factories import candidates_create
from candidates.selectors import candidates_with_identity
from core.errors import Busy, Invalid
from exports.archive import ARCHIVE_INDEX
from exports.factories import annotate_all, gold_create, items_import, recompressed
from exports.models import ExportJob, NearDuplicatePair, Release
from exports.selectors import candidates_by_item, release_dir, released_gold_queryset, releases_root
from exports.services import (
    export_job_run,
    export_job_start,
    near_duplicate_pair_review,
    near_duplicates_detect,
)
from exports.writers import file_digest
from projects.factories import image_bytes
from projects.models import Stage
from projects.services import item_stage_set

pytestmark = pytest.mark.django_db


def build(project, user) -> Release:
    job = export_job_start(project=project, user=user, enqueue=False)
    release = export_job_run(job=job)
    job.refresh_from_db()
    assert release is not None, job.error
    assert job.status == "done" and job.release == release and job.percent == 100
    assert job.progress_done == job.progress_total > 0
    return release


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def v1(project, dup_gold, lead, reviewer):
    near_duplicates_detect(project=project)
    pair = NearDuplicatePair.objects.get(item_a=dup_gold[0])
    near_duplicate_pair_review(pair=pair, reviewer=reviewer, decision="same", expected_status="unreviewed")
    candidates_create(dup_gold[0], [MEME3W_HARMFUL, MEME3W_NOT_HARMFUL, MEME3W_HARMFUL])
    return build(project, lead)


def test_release_files_match_the_manifest_and_hold_what_section_5_lists(
    project, dup_gold, v1, annotator_a, annotator_b
):
    root = release_dir(v1)
    m = v1.manifest
    assert v1.number == 1 and v1.directory == f"{project.pk}/v1" and v1.record_count == 11
    on_disk = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and p.parent.name != "images" and p.name != ARCHIVE_INDEX
    )
    assert on_disk == sorted([*m["files"], "manifest.json"])
    per_split = {
        f"{kind}/{s}.{ext}"
        for kind in ("records", "annotations", "candidates")
        for s in ("train", "val", "test")
        for ext in ("jsonl", "parquet")
    }
    assert {
        "records.jsonl",
        "records.parquet",
        "annotations.jsonl",
        "annotations.parquet",
        "candidates.jsonl",
        "candidates.parquet",
        "agreement.json",
        "audit.json",
        "splits.json",
        "lexicon.json",
        "coco/train.json",
        "coco/val.json",
        "coco/test.json",
        "README.md",
        "croissant.json",
        "guideline.md",
        "prompt.txt",
        "images.jsonl",
        "evaluate.py",  # the evaluation code (SPEC section 6; metrics.evaluation)
        "evaluation.json",
        *per_split,
    } == set(m["files"])
    for name, meta in m["files"].items():
        assert file_digest(root / name).as_dict() == meta, name
        assert stat.S_IMODE((root / name).stat().st_mode) == 0o444  # published files are read-only
    assert file_digest(root / "manifest.json").sha256 == v1.manifest_sha256
    assert json.loads((root / "manifest.json").read_text()) == m
    assert m["counts"]["records"] == 11 and m["counts"]["excluded_exact_duplicates"] == 1
    assert m["near_duplicates"]["unreviewed_pairs"] == 1 and m["near_duplicates"]["same"] == 1
    assert m["integrity"]["ok"] and sum(m["counts"]["by_split"].values()) == 11
    assert m["candidate_models"] == {
        "SecretProviderAlpha (gpt-4o-hidden-model)": 1,
        "SecretProviderBeta (gemini-hidden-model)": 1,
        "SecretProviderGamma (qwen-vl-hidden-model)": 1,
    }

    s = {i.source_id: i for i in dup_gold}
    records = read_jsonl(root / "records.jsonl")
    assert [r["item_id"] for r in records] == sorted(i.pk for i in dup_gold if i.source_id != "s3")
    rec = {r["source_id"]: r for r in records}
    assert rec["s0"]["split"] == rec["s1"]["split"] and rec["s1"]["near_duplicate_group"] == s["s0"].pk
    assert rec["s4"]["split"] == rec["s5"]["split"]
    assert rec["s0"]["gold"]["label"] == "harmful" and rec["s0"]["provenance"]["label"] == {"source": "identical"}
    # images: included only when the license allows; the file is the stored image, byte for byte
    assert rec["s0"]["image"]["file"] == f"images/{s['s0'].image_sha256}.jpg"
    assert rec["s1"]["image"]["file"] is None and rec["s1"]["image"]["sha256"] == s["s1"].image_sha256
    assert file_digest(root / rec["s0"]["image"]["file"]).sha256 == s["s0"].image_sha256
    assert sorted(p.name for p in (root / "images").iterdir()) == sorted(
        f"{s[k].image_sha256}.jpg" for k in ("s0", "s2")
    )
    assert {r["item_id"] for r in read_jsonl(root / "images.jsonl")} == {s["s0"].pk, s["s2"].pk}

    splits = json.loads((root / "splits.json").read_text())
    assert splits["excluded"][0]["item_id"] == s["s3"].pk and splits["integrity"]["ok"]
    assert {tuple(g["item_ids"]) for g in splits["groups"]} == {(s["s0"].pk, s["s1"].pk), (s["s4"].pk, s["s5"].pk)}

    # raw annotations: pseudonymous, numbered by first submission, never usernames
    annotations = read_jsonl(root / "annotations.jsonl")
    assert len(annotations) == 22 and {a["annotator"] for a in annotations} == {"annotator-01", "annotator-02"}
    first = Annotation.objects.filter(status="submitted").order_by("first_submitted_at", "id").first().annotator
    assert first == annotator_a
    a_values = Annotation.objects.get(item=s["s0"], annotator=annotator_a).values
    mine = [a["values"] for a in annotations if a["item_id"] == s["s0"].pk and a["annotator"] == "annotator-01"]
    assert mine == [a_values]
    for path in root.rglob("*"):
        if path.is_file() and path.parent.name != "images":
            text = path.read_text(encoding="utf-8", errors="replace")
            assert annotator_a.username not in text and annotator_b.username not in text, path.name

    cands = read_jsonl(root / "candidates.jsonl")
    assert [c["model_name"] for c in cands] == ["gpt-4o-hidden-model", "gemini-hidden-model", "qwen-vl-hidden-model"]
    assert cands[0]["fields"]["label"] == "harmful" and cands[0]["item_id"] == s["s0"].pk

    coco = {"images": [], "annotations": []}
    for split in ("train", "val", "test"):
        part = json.loads((root / f"coco/{split}.json").read_text())
        assert {i["split"] for i in part["images"]} <= {split}
        coco["images"] += part["images"]
        coco["annotations"] += part["annotations"]
        coco["categories"] = part["categories"]
    assert [c["name"] for c in coco["categories"]] == [
        "group background",
        "religion and caste",
        "gender",
        "health condition",
    ]
    assert len(coco["images"]) == 11
    ann = next(a for a in coco["annotations"] if a["image_id"] == s["s0"].pk)
    assert ann["bbox"] == [32.0, 28.8, 96.0, 91.2] and ann["bbox_normalized_1000"] == [100, 120, 400, 500]
    assert ann["category_id"] == 1
    assert json.loads((root / "lexicon.json").read_text())["version"] == 1
    readme = (root / "README.md").read_text()
    assert "Integrity check: **passed**" in readme and "**1 unreviewed**" in readme

    # researchers' tools read it
    df = pd.read_json(root / "records.jsonl", lines=True)
    table = pq.read_table(root / "records.parquet")
    assert df["item_id"].tolist() == table.column("item_id").to_pylist()
    assert df["split"].tolist() == table.column("split").to_pylist()
    assert table.to_pylist()[0]["gold"] == records[0]["gold"]
    # provenance is a nested column, not JSON text
    assert table.schema.field("provenance").type.num_fields > 0
    assert table.to_pylist()[0]["provenance"]["label"]["source"] == "identical"


def test_same_state_twice_gives_byte_identical_files(project, v1, lead):
    v2 = build(project, lead)
    assert v2.number == 2 and v2.manifest_sha256 == v1.manifest_sha256
    a, b = release_dir(v1), release_dir(v2)
    # the archive index is not a release file: its entries name the archive folder (p1-v1/...)
    names = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file() and p.name != ARCHIVE_INDEX)
    assert names == sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file() and p.name != ARCHIVE_INDEX)
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_a_failure_mid_build_publishes_nothing(project, gold_items, lead, monkeypatch):
    def boom(**kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("exports.build.release._write_candidates", boom)
    job = export_job_start(project=project, user=lead, enqueue=False)
    assert export_job_run(job=job) is None
    job.refresh_from_db()
    assert job.status == ExportJob.Status.FAILED and "disk on fire" in job.error and job.release is None
    assert not Release.objects.exists()
    root = releases_root()
    assert list((root / ".building").iterdir()) == [] and not (root / str(project.pk)).exists()
    monkeypatch.undo()
    assert build(project, lead).number == 1  # the failed job does not block the next one


def test_a_failure_while_publishing_leaves_no_folder(project, gold_items, lead, monkeypatch):
    def fail_after_move(src, dst):
        os.rename(src, dst)
        raise OSError("lost the disk after the move")

    monkeypatch.setattr("exports.services.os.replace", fail_after_move)
    job = export_job_start(project=project, user=lead, enqueue=False)
    assert export_job_run(job=job) is None
    assert not Release.objects.exists() and not (releases_root() / str(project.pk) / "v1").exists()


def test_start_refuses_without_gold_and_while_a_build_is_active(project, items, lead, annotator_a, annotator_b):
    with pytest.raises(Invalid, match="no gold"):
        export_job_start(project=project, user=lead, enqueue=False)
    gold_create(project, items[:1], [annotator_a, annotator_b])
    job = export_job_start(project=project, user=lead, enqueue=False)
    with pytest.raises(Busy):
        export_job_start(project=project, user=lead, enqueue=False)
    export_job_run(job=job)
    assert export_job_run(job=job) is None  # a redelivered task: the job is done, nothing happens
    assert Release.objects.count() == 1


def test_reviewer_decisions_are_pseudonymous(project, items, lead, annotator_a, annotator_b, reviewer):
    from annotation.factories import items_open

    items_open(items[:2])
    annotate_all(
        project,
        [annotator_a, annotator_b],
        values_for=lambda item, user: MEME3W_HARMFUL if user == annotator_a else MEME3W_NOT_HARMFUL,
    )
    assert gold_decide_all(project, reviewer, pick=2) == 2
    release = build(project, lead)
    records = read_jsonl(release_dir(release) / "records.jsonl")
    assert records[0]["gold"]["label"] == "non-harmful"
    assert records[0]["provenance"]["label"] == {"source": "reviewer", "from_annotator": 2, "decided_by": "reviewer-01"}
    assert str(reviewer.pk) not in json.dumps([r["provenance"] for r in records]).replace("reviewer-01", "")


def test_bulk_candidates_match_the_candidates_selector(project, items):
    candidates_create(items[0], [MEME3W_HARMFUL, MEME3W_NOT_HARMFUL, MEME3W_HARMFUL])
    candidates_create(items[2], [MEME3W_NOT_HARMFUL, MEME3W_HARMFUL, MEME3W_NOT_HARMFUL], prompt_version="v1")
    candidates_create(items[2], [MEME3W_HARMFUL, MEME3W_HARMFUL, MEME3W_HARMFUL], prompt_version="v2")  # newer
    bulk = dict(candidates_by_item(project=project, chunk_size=2))
    assert set(bulk) == {items[0].pk, items[2].pk}
    for item in (items[0], items[2]):
        assert [c["id"] for c in bulk[item.pk]] == [c.id for c in candidates_with_identity(item=item)]


def test_diff_lists_added_removed_and_changed_items(
    project, gold_items, lead, reviewer, annotator_a, annotator_b, tmp_path
):
    v1 = build(project, lead)
    # change one gold record through adjudication, exclude one item, add one new gold item
    gold_send_back(item=gold_items[0], lead=lead)
    task = adjudication_next(project=project, reviewer=reviewer)
    gold_decide(
        task=task, reviewer=reviewer, decisions={"target_entity": {"value": "Zorgians"}}, note="", version=task.version
    )
    item_stage_set(item=gold_items[1], stage=Stage.EXCLUDED)
    new = items_import(
        project,
        tmp_path / "new",
        [{"source_id": "n1", "data": recompressed(image_bytes(50)), "text": "Brand new Zorg meme"}],
    )
    gold_create(project, new, [annotator_a, annotator_b])
    v2 = build(project, lead)
    from exports.selectors import release_diff

    diff = release_diff(old=v1, new=v2)
    assert diff["counts"] == {"added": 1, "removed": 1, "changed": 1, "unchanged": 2}
    changed = next(c for c in diff["changes"] if c["kind"] == "changed")
    assert changed["item_id"] == gold_items[0].pk
    assert "gold.target_entity" in changed["fields"] and "gold_revision" in changed["fields"]
    assert {c["kind"]: c["item_id"] for c in diff["changes"] if c["kind"] != "changed"} == {
        "removed": gold_items[1].pk,
        "added": new[0].pk,
    }
    assert not diff["identical"] and not diff["truncated"]
    assert release_diff(old=v1, new=v2, limit=1)["truncated"]


def test_quality_reports_and_blind_audits_are_exported(project, gold_items, lead, auditor):
    from quality.factories import audit_submit_all
    from quality.services import audit_create

    audit = audit_create(project=project, created_by=lead, size=2, seed=1)
    assert audit_submit_all(audit, lambda item, gold: gold) == 2
    release = build(project, lead)
    root = release_dir(release)
    report = json.loads((root / "audit.json").read_text())
    assert report["progress"]["compared"] == 2 and report["table9"]["rows"]
    agreement = json.loads((root / "agreement.json").read_text())
    assert agreement["n_items"] == 4 and agreement["headline"]
    audits = [a for a in read_jsonl(root / "annotations.jsonl") if a["kind"] == "audit"]
    assert len(audits) == 2 and {a["annotator"] for a in audits} == {"auditor-01"}
    readme = (root / "README.md").read_text()
    assert "2 audited items compared with gold" in readme and "Unweighted mean" in readme
    assert auditor.username not in (root / "audit.json").read_text()


def test_a_running_job_is_taken_over_only_when_its_worker_must_be_dead(project, gold_items, lead):
    from datetime import timedelta

    from django.utils import timezone

    from core.models import job_lease

    now = timezone.now()
    job = ExportJob.objects.create(project=project, created_by=lead, status="running", started_at=now, heartbeat_at=now)
    assert export_job_run(job=job) is None  # another worker is on it (its heartbeat is fresh)
    ExportJob.objects.filter(pk=job.pk).update(heartbeat_at=now - job_lease() - timedelta(seconds=1))
    leftover = releases_root() / ".building" / f"job-{job.pk}-deadbeef"
    leftover.mkdir(parents=True)
    (leftover / "records.jsonl").write_text("half a file")
    release = export_job_run(job=job)
    assert release is not None and release.number == 1 and not leftover.exists()
    job.refresh_from_db()
    assert job.taken_over_at is not None and job.attempts == 1


def test_parquet_statistics_are_kept_for_ids_numbers_and_categories_not_for_text_json_or_image_bytes(v1):
    root = release_dir(v1)
    for name in ("records.parquet", "records/train.parquet", "annotations.parquet", "candidates.parquet"):
        meta = pq.ParquetFile(root / name).metadata
        assert meta.num_row_groups >= 1, name
        stats = {
            meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i).is_stats_set
            for i in range(meta.num_columns)
        }
        assert stats["item_id"] and stats["split"], name
        assert not any(v for k, v in stats.items() if k == "text" or k.startswith("image_data")), name
    stats = pq.ParquetFile(root / "records.parquet").metadata.row_group(0)
    paths = {stats.column(i).path_in_schema: stats.column(i) for i in range(stats.num_columns)}
    assert paths["image.width"].is_stats_set and not paths["image.sha256"].is_stats_set
    assert paths["item_id"].statistics.min <= paths["item_id"].statistics.max


def test_data_as_of_is_the_newest_released_decision_to_the_second_in_utc(project, v1, lead):
    gold = released_gold_queryset(project=project).order_by("item_id").first()
    # microseconds and another zone: the text is the UTC second, whatever the database stores
    when = datetime(2031, 5, 28, 20, 26, 40, 987654, tzinfo=timezone(timedelta(hours=5)))
    type(gold).objects.filter(pk=gold.pk).update(created_at=when)
    v2 = build(project, lead)
    assert v2.manifest["data_as_of"] == "2031-05-28T15:26:40Z"
    assert v1.manifest["data_as_of"] < v2.manifest["data_as_of"]
