"""A release's files are those of the straightforward build: records, annotations and
candidates read as model instances (Django's own JSON decoding, datetimes formatted in Python),
COCO written with the standard library's encoder, Parquet re-read from the JSONL files
(jsonl_to_parquet / split_twin). The streamed build (rows in chunks, orjson, Parquet from the
rows as they are written) must give the same bytes."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from annotation.models import Annotation
from candidates.selectors import candidates_with_identity
from exports.build.annotations import ANNOTATION_COLUMNS, CANDIDATE_COLUMNS_OUT, _declared
from exports.build.records import (
    IMAGE_DATA_TYPE,
    IMAGE_GROUP_BYTES,
    RECORD_COLUMNS,
    _pseudonymize_provenance,
    _reference_authors,
    coco_licenses,
    records_declared_types,
)
from exports.build.tables import jsonl_to_parquet, split_twin
from exports.selectors import (
    annotator_pseudonyms,
    coco_fields,
    release_card_settings,
    release_dir,
    released_gold_queryset,
    split_plan,
)
from exports.splitting import SPLITS
from exports.tests import test_memecap_release, test_release
from exports.writers import UNSPECIFIED_CATEGORY, box_polygon, box_to_pixels, canonical_json
from projects.fieldtypes import REGISTRY
from projects.models import Item

pytestmark = pytest.mark.django_db
# The projects of those tests (fixtures): duplicates, a reviewer, candidates; MemeCap's references.
v1 = test_release.v1
memecap_release = test_memecap_release.memecap_release


def lines(path) -> list[bytes]:
    return path.read_bytes().splitlines()


def expected_records(project) -> list[dict]:
    plan = split_plan(project=project)
    pseudonyms = annotator_pseudonyms(project=project)
    authors = _reference_authors(project, pseudonyms)
    fields = project.schema["fields"]
    out = []
    for gold in released_gold_queryset(project=project).select_related("item").order_by("item_id"):
        item = gold.item
        split = plan.split_of(item.pk)
        if split is None:
            continue
        included = bool(item.redistributable)
        ext = item.image.rsplit(".", 1)[-1]
        values = gold.values or {}
        out.append(
            {
                "item_id": item.pk,
                "source_id": item.source_id,
                "source_dataset": item.source_dataset,
                "import_key": item.import_key,
                "text": item.text,
                "title": item.title,
                "language": item.language,
                "domain": item.domain,
                "metadata": item.metadata or {},
                "split": split,
                "near_duplicate_group": plan.group_of_item(item.pk),
                "image": {
                    "file": f"images/{item.image_sha256}.{ext}" if included else None,
                    "format": item.image_format,
                    "height": item.height,
                    "phash": item.phash,
                    "pixel_hash": item.pixel_hash,
                    "redistributable": item.redistributable,
                    "sha256": item.image_sha256,
                    "width": item.width,
                },
                "gold": {
                    f["name"]: REGISTRY[f["type"]].export(f, values.get(f["name"], REGISTRY[f["type"]].absent(f)))
                    for f in fields
                },
                "provenance": _pseudonymize_provenance(gold.provenance, pseudonyms, authors),
                "gold_revision": gold.revision,
                "schema_version": gold.schema_version,
                "lexicon_version": gold.lexicon_version,
            }
        )
    return out


def iso(ts) -> str | None:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if ts is not None else None


def expected_annotations(project, splits: dict[int, str]) -> list[dict]:
    pseudonyms = annotator_pseudonyms(project=project)
    by_item: dict[int, list[Annotation]] = {}
    rows = Annotation.objects.filter(item__project=project, status=Annotation.Status.SUBMITTED)
    for a in rows.order_by("item_id", "kind", "first_submitted_at", "id"):
        by_item.setdefault(a.item_id, []).append(a)
    out = []
    for item_id, group in by_item.items():
        if item_id not in splits:
            continue
        order: Counter = Counter()
        compared = sum(1 for a in group if a.kind == "annotation") >= 2
        for a in group:
            order[a.kind] += 1
            kept = a.kind == "annotation" and compared and order[a.kind] <= project.annotators_per_item
            out.append(
                {
                    "item_id": item_id,
                    "split": splits[item_id],
                    "annotator": pseudonyms[(a.kind, a.annotator_id)],
                    "kind": a.kind,
                    "submission_order": order[a.kind],
                    "agreement_slot": order[a.kind] if kept else None,
                    "submitted_at": iso(a.first_submitted_at or a.submitted_at),
                    "last_submitted_at": iso(a.submitted_at or a.first_submitted_at),
                    "values": a.values or {},
                    "provenance": a.provenance or {},
                    "schema_version": a.schema_version,
                    "guideline_version": a.guideline_version,
                    "time_spent_ms": a.time_spent_ms,
                }
            )
    return out


def expected_candidates(splits: dict[int, str]) -> list[dict]:
    out = []
    for item in Item.objects.filter(pk__in=splits).order_by("pk"):
        for c in candidates_with_identity(item=item):
            out.append(
                {
                    "item_id": item.pk,
                    "split": splits[item.pk],
                    "candidate_id": c.id,
                    "provider": c.provider_name,
                    "provider_kind": c.provider_kind,
                    "model_name": c.model_name,
                    "prompt_version": c.prompt_version,
                    "fields": c.fields or {},
                    "removed": c.removed or [],
                    "think": c.think,
                    "latency_ms": c.latency_ms,
                    "prompt_tokens": c.prompt_tokens,
                    "completion_tokens": c.completion_tokens,
                }
            )
    return out


def expected_coco(project, records: list[dict], split: str, root) -> dict:
    boxes_field, category_field = coco_fields(project.schema)
    categories = list(category_field["choices"]) if category_field else []
    if category_field is None or not category_field.get("required"):
        categories.append(UNSPECIFIED_CATEGORY)
    ids = {name: i for i, name in enumerate(categories, start=1)}
    paths = dict(Item.objects.filter(project=project).values_list("pk", "image"))
    images, annotations = [], []
    for r in records:
        if r["split"] != split:
            continue
        img = r["image"]
        included = bool(img["redistributable"])
        images.append(
            {
                "id": r["item_id"],
                "file_name": f"{img['sha256']}.{paths[r['item_id']].rsplit('.', 1)[-1]}",
                "width": img["width"],
                "height": img["height"],
                "license": 1 if included else 0,
                "sha256": img["sha256"],
                "source_id": r["source_id"],
                "split": split,
                "included": included,
            }
        )
        for box in r["gold"].get(boxes_field["name"]) or []:
            bbox = box_to_pixels(box, img["width"], img["height"])
            category = r["gold"].get(category_field["name"]) if category_field else None
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": r["item_id"],
                    "category_id": ids.get(category) or ids.get(UNSPECIFIED_CATEGORY),
                    "bbox": bbox,
                    "segmentation": [box_polygon(bbox)],
                    "area": round(bbox[2] * bbox[3], 2),
                    "iscrowd": 0,
                    "bbox_normalized_1000": list(box),
                }
            )
    written = json.loads((root / f"coco/{split}.json").read_text())  # info and licenses: the card's words
    return {
        "annotations": annotations,
        "categories": [{"id": i, "name": name, "supercategory": "target"} for name, i in ids.items()],
        "images": images,
        "info": written["info"],
        "licenses": coco_licenses(release_card_settings(project=project)),
    }


def assert_parquet_is_the_straightforward_one(project, root, tmp_path):
    ref = tmp_path / "reference"
    for kind, columns, declared, options in (
        (
            "records",
            RECORD_COLUMNS,
            records_declared_types(project.schema["fields"]),
            {
                "extra": {
                    "image_data": (
                        IMAGE_DATA_TYPE,
                        lambda r: (
                            {"bytes": (root / f).read_bytes(), "path": f}
                            if (f := (r.get("image") or {}).get("file"))
                            else None
                        ),
                    )
                },
                "image_columns": ("image_data",),
                "group_bytes": IMAGE_GROUP_BYTES,
            },
        ),
        ("annotations", ANNOTATION_COLUMNS, _declared(project, "annotations"), {}),
        ("candidates", CANDIDATE_COLUMNS_OUT, _declared(project, "candidates"), {}),
    ):
        (ref / kind).mkdir(parents=True)
        whole = jsonl_to_parquet(root / f"{kind}.jsonl", ref / f"{kind}.parquet", columns=columns, declared=declared)
        assert (root / f"{kind}.parquet").read_bytes() == (ref / f"{kind}.parquet").read_bytes(), kind
        for split in SPLITS:
            name = f"{kind}/{split}.parquet"
            split_twin(root / f"{kind}/{split}.jsonl", ref / name, whole=whole, columns=columns, **options)
            assert (root / name).read_bytes() == (ref / name).read_bytes(), name


def assert_the_straightforward_release(project, release, tmp_path):
    root = release_dir(release)
    records = expected_records(project)
    assert lines(root / "records.jsonl") == [canonical_json(r).encode() for r in records]
    for split in SPLITS:
        assert lines(root / f"records/{split}.jsonl") == [
            canonical_json(r).encode() for r in records if r["split"] == split
        ]
    splits = {r["item_id"]: r["split"] for r in records}
    annotations = expected_annotations(project, splits)
    assert annotations, "the project has annotations to compare"
    assert lines(root / "annotations.jsonl") == [canonical_json(a).encode() for a in annotations]
    candidates = expected_candidates(splits)
    assert lines(root / "candidates.jsonl") == [canonical_json(c).encode() for c in candidates]
    counts = release.manifest["counts"]
    for kind, rows in (("annotations", annotations), ("candidates", candidates)):
        assert counts[f"{kind}_by_split"] == {s: sum(1 for r in rows if r["split"] == s) for s in SPLITS}
        for split in SPLITS:
            assert lines(root / f"{kind}/{split}.jsonl") == [
                canonical_json(r).encode() for r in rows if r["split"] == split
            ]
    at = [a["submitted_at"] for a in annotations if a["submitted_at"]]
    assert release.manifest["annotation_period"] == {"first": min(at), "last": max(at)}
    if coco_fields(project.schema)[0] is not None:
        for split in SPLITS:
            coco = expected_coco(project, records, split, root)
            assert (root / f"coco/{split}.json").read_bytes() == (canonical_json(coco) + "\n").encode(), split
    assert_parquet_is_the_straightforward_one(project, root, tmp_path)


def test_a_meme3w_release_is_the_straightforward_build(project, v1, tmp_path):
    assert any(json.loads(line)["gold"].get("visual_region") for line in lines(release_dir(v1) / "records.jsonl")), (
        "boxes to write as COCO"
    )
    assert_the_straightforward_release(project, v1, tmp_path)


def test_a_references_release_is_the_straightforward_build(memecap_release, tmp_path):
    project, release = memecap_release
    assert_the_straightforward_release(project, release, tmp_path)
