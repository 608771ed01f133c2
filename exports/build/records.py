"""records.jsonl / records.parquet / coco.json / images: one pass over the released gold."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from django.db.models import F, TextField
from django.db.models.functions import Cast

from annotation.models import Annotation
from core.streams import stream
from exports.build.tables import IMAGE_DATA_TYPE, IMAGE_GROUP_BYTES, ParquetFamily, SplitOptions
from exports.build.ticker import READ_CHUNK, _Ticker
from exports.build.times import IsoUtc, iso_in_sql, iso_utc
from exports.selectors import (
    SplitPlan,
    coco_fields,
    released_file_name,
    released_gold_queryset,
)
from exports.splitting import SPLITS
from exports.writers import (
    UNSPECIFIED_CATEGORY,
    CocoWriter,
    JsonlWriter,
    json_loads,
    link_or_copy,
    records_arrow_schema,
)
from projects.fieldtypes import REGISTRY
from projects.imaging import image_path
from projects.models import ItemVariant, Project


def _pseudonymize_provenance(provenance: dict, pseudonyms: dict, authors: dict | None = None) -> dict:
    """Gold provenance with the reviewer's user id replaced by their pseudonym, and the kept
    references' annotation ids (a references workflow) by their annotators' pseudonyms, in
    the same order as the gold list: database ids never leave."""
    out = {}
    for name, entry in (provenance or {}).items():
        if isinstance(entry, dict) and "decided_by" in entry:
            entry = {**entry, "decided_by": pseudonyms.get(("reviewer", entry["decided_by"]))}
        if isinstance(entry, dict) and isinstance(entry.get("annotations"), list):
            entry = {k: v for k, v in entry.items() if k != "annotations"}
            entry["annotators"] = [(authors or {}).get(pk) for pk in provenance[name]["annotations"]]
        out[name] = entry
    return out


def _reference_authors(project: Project, pseudonyms: dict) -> dict[int, str]:
    """{annotation id: annotator pseudonym} when the workflow keeps references (else empty:
    nothing to map, nothing loaded)."""
    if all(s.gold == "adjudicate" for s in project.get_workflow().stages):
        return {}
    rows = Annotation.objects.filter(item__project=project, status=Annotation.Status.SUBMITTED).values_list(
        "pk", "kind", "annotator_id"
    )
    return {pk: pseudonyms.get((kind, who)) for pk, kind, who in rows.iterator(chunk_size=READ_CHUNK)}


def _variants_by_item(project: Project) -> dict[int, list[tuple]]:
    """{item id: [(kind, source, path, sha256, width, height)]} of the project's image variants
    (one query; empty for projects without OCR)."""
    out: dict[int, list[tuple]] = {}
    rows = ItemVariant.objects.filter(item__project=project).order_by("item_id", "kind")
    for row in rows.values_list("item_id", "kind", "source", "image", "image_sha256", "width", "height"):
        out.setdefault(row[0], []).append(row[1:])
    return out


#: Columns of a released gold record and its item, read as rows (JSON as text, decoded by
#: orjson: Django's JSONField decodes with the stdlib, and model instances cost more than the
#: record itself).
GOLD_ITEM_COLUMNS = (
    "item_id",
    "item__source_id",
    "item__source_dataset",
    "item__import_key",
    "item__text",
    "item__title",
    "item__language",
    "item__domain",
    "metadata_text",
    "item__image",
    "item__image_sha256",
    "item__image_format",
    "item__width",
    "item__height",
    "item__phash",
    "item__pixel_hash",
    "item__redistributable",
    "values_text",
    "provenance_text",
    "revision",
    "schema_version",
    "lexicon_version",
    "created_text",
)


def _released_gold_rows(project: Project):
    return (
        released_gold_queryset(project=project)
        .order_by("item_id")
        .annotate(
            metadata_text=Cast("item__metadata", TextField()),
            values_text=Cast("values", TextField()),
            provenance_text=Cast("provenance", TextField()),
            # The decision's time as text (no datetime per record): only the newest is used.
            created_text=IsoUtc("created_at") if iso_in_sql() else F("created_at"),
        )
        .values_list(*GOLD_ITEM_COLUMNS)
    )


def _json(text: str | None):
    return json_loads(text) if text is not None else None


_MISSING = object()


#: File name of a Concord split in the per-split folders, and its Hugging Face split name.
HF_SPLIT = {"train": "train", "val": "validation", "test": "test"}
NOT_REDISTRIBUTABLE_LICENSE = {
    "id": 0,
    "name": "not redistributable: the image is not in this release (referenced by sha256 and source id)",
    "url": "",
}


def split_file(kind: str, split: str, ext: str) -> str:
    """Per-split file of a release: records/train.jsonl, annotations/val.parquet, coco/test.json."""
    return f"{kind}/{split}.{ext}"


def coco_licenses(card: dict) -> list[dict]:
    return [
        {
            "id": 1,
            "name": card.get("license_name") or card.get("license") or "unspecified",
            "url": card.get("license_url", ""),
        },
        NOT_REDISTRIBUTABLE_LICENSE,
    ]


def _coco_writers(*, project: Project, dest: Path, card: dict) -> tuple[dict | None, dict | None, dict]:
    boxes_field, category_field = coco_fields(project.schema)
    if boxes_field is None:
        return None, None, {}
    (dest / "coco").mkdir()
    categories = list(category_field["choices"]) if category_field else []
    if category_field is None or not category_field.get("required"):
        categories.append(UNSPECIFIED_CATEGORY)
    writers = {}
    for split in SPLITS:
        writers[split] = CocoWriter(
            dest / split_file("coco", split, "json"),
            categories=categories,
            licenses=coco_licenses(card),
            info={
                "description": f"{project.name}, {split} split: boxes of field {boxes_field['name']!r}"
                + (f", categories from {category_field['name']!r}" if category_field else ""),
                "split": split,
                "box_field": boxes_field["name"],
                "category_field": category_field["name"] if category_field else None,
                "image_root": "images/",
                "bbox": "pixels [x, y, width, height]; segmentation = the box as a polygon; "
                "bbox_normalized_1000 = [x1, y1, x2, y2] in [0, 1000]",
                "images_not_included": "images with license 0 are not redistributable: their file_name is the "
                "name they would have, they are matched by sha256 / source_id",
            },
        )
    return boxes_field, category_field, writers


def _write_records(
    *, project: Project, plan: SplitPlan, dest: Path, pseudonyms: dict, tick: _Ticker, card: dict | None = None
) -> dict:
    """records.jsonl, records/<split>.jsonl, their Parquet twins, coco/<split>.json, images/
    and images.jsonl in one pass over the released gold (read as rows, in chunks)."""
    card = card or {}
    fields = project.schema["fields"]
    # Each field type owns its export form; looked up once, not per record.
    exports = [(f["name"], f, REGISTRY[f["type"]]) for f in fields]
    jsonl = JsonlWriter(dest / "records.jsonl")
    (dest / "records").mkdir()
    per_split = {split: JsonlWriter(dest / split_file("records", split, "jsonl")) for split in SPLITS}
    parquet = _records_parquet_family(project=project, dest=dest)
    images_index = JsonlWriter(dest / "images.jsonl")
    (dest / "images").mkdir()
    # Derived images (projects.ocr: the text-free variant MemeCap's round 1 looked at) ship next
    # to the originals under the same licence flag, listed in variants.jsonl by item.
    variants = _variants_by_item(project)
    variants_index = JsonlWriter(dest / "variants.jsonl") if variants else None
    boxes_field, category_field, cocos = _coco_writers(project=project, dest=dest, card=card)
    boxes_name = boxes_field["name"] if boxes_field else None
    category_name = category_field["name"] if category_field else None
    counts = {
        "by_split": Counter(),
        "gold": {f["name"]: Counter() for f in fields if "counted" in REGISTRY[f["type"]].roles},
        "images_included": 0,
        "variants_included": 0,
        "images_referenced": 0,
        "boxes": 0,
        "boxes_by_split": Counter(),
    }
    gold_counts = list(counts["gold"].items())
    data_as_of = None
    done = 0
    authors = _reference_authors(project, pseudonyms)
    reference_fields = project.get_workflow().reference_fields()
    # {field: {split: Counter(number of references per item)}}: MemeCap's split-dependent counts.
    counts["references"] = {name: {s: Counter() for s in SPLITS} for name in reference_fields}
    references = list(counts["references"].items())
    try:
        for (
            item_id,
            source_id,
            source_dataset,
            import_key,
            text,
            title,
            language,
            domain,
            metadata,
            image_rel,
            image_sha256,
            image_format,
            width,
            height,
            phash,
            pixel_hash,
            redistributable,
            values,
            provenance,
            revision,
            schema_version,
            lexicon_version,
            created,
        ) in stream(_released_gold_rows(project), READ_CHUNK):
            split = plan.split_of(item_id)
            if split is None:
                continue  # an exact duplicate removed by the plan, or gold that appeared meanwhile
            included = bool(redistributable)
            ext = image_rel.rsplit(".", 1)[-1]  # COCO's file_name is relative to images/
            image = {
                "file": released_file_name(image_sha256, image_rel) if included else None,
                "format": image_format,
                "height": height,
                "phash": phash,
                "pixel_hash": pixel_hash,
                "redistributable": redistributable,
                "sha256": image_sha256,
                "width": width,
            }
            if included:
                src = image_path(image_rel)
                link_or_copy(src, dest / image["file"])
                images_index.write(
                    {"file": image["file"], "sha256": image_sha256, "bytes": src.stat().st_size, "item_id": item_id}
                )
                counts["images_included"] += 1
                for kind, source, rel, sha, v_width, v_height in variants.get(item_id, ()):
                    name = released_file_name(sha, rel)
                    link_or_copy(image_path(rel), dest / name)
                    variants_index.write(
                        {"item_id": item_id, "kind": kind, "source": source, "file": name, "sha256": sha}
                        | {"width": v_width, "height": v_height}
                    )
                    counts["variants_included"] += 1
            else:
                counts["images_referenced"] += 1
            values = _json(values) or {}
            gold = {}
            for name, spec, ftype in exports:
                value = values.get(name, _MISSING)
                gold[name] = ftype.export(spec, ftype.absent(spec) if value is _MISSING else value)
            record = {
                "item_id": item_id,
                "source_id": source_id,
                "source_dataset": source_dataset,
                "import_key": import_key,
                "text": text,
                "title": title,
                "language": language,
                "domain": domain,
                "metadata": _json(metadata) or {},
                "split": split,
                "near_duplicate_group": plan.group_of_item(item_id),
                "image": image,
                "gold": gold,
                "provenance": _pseudonymize_provenance(_json(provenance), pseudonyms, authors),
                "gold_revision": revision,
                "schema_version": schema_version,
                "lexicon_version": lexicon_version,
            }
            per_split[split].write_line(jsonl.write(record))
            parquet.add(record, split)
            for name, by_split in references:
                kept = gold.get(name)
                by_split[split][len(kept) if isinstance(kept, list) else 0] += 1
            if cocos:
                boxes = gold.get(boxes_name) or []
                cocos[split].add(
                    image={
                        "id": item_id,
                        "file_name": f"{image_sha256}.{ext}",
                        "width": width,
                        "height": height,
                        "license": 1 if included else 0,
                        "sha256": image_sha256,
                        "source_id": source_id,
                        "split": split,
                        "included": included,
                    },
                    boxes=boxes,
                    category=gold.get(category_name) if category_name else None,
                )
                counts["boxes"] += len(boxes)
                counts["boxes_by_split"][split] += len(boxes)
            counts["by_split"][split] += 1
            for name, counter in gold_counts:
                counter[str(gold.get(name))] += 1
            if data_as_of is None or created > data_as_of:
                data_as_of = created
            done += 1
            if tick.due():
                tick("records", done)
    except BaseException:
        for coco in cocos.values():
            coco.abort()
        parquet.abort()
        raise
    digests = {"records.jsonl": jsonl.close(), "images.jsonl": images_index.close()}
    if variants_index is not None:
        digests["variants.jsonl"] = variants_index.close()
    for split, writer in per_split.items():
        digests[split_file("records", split, "jsonl")] = writer.close()
    for split, coco in cocos.items():
        digests[split_file("coco", split, "json")] = coco.close()
    results = parquet.close()
    parquet_results = {"records.parquet": results["whole"]}
    parquet_results |= {split_file("records", split, "parquet"): results[split] for split in SPLITS}
    digests |= {name: r.digest for name, r in parquet_results.items()}
    counts["records"] = done
    # The newest decision, "2026-05-28T20:26:40.000000Z" (the text compares as the times do).
    counts["data_as_of"] = data_as_of if isinstance(data_as_of, str) else iso_utc(data_as_of)
    counts["digests"] = digests
    counts["parquet"] = parquet_results
    return counts


def records_declared_types(fields: list[dict]) -> dict:
    """Declared Parquet types of the record columns (metadata and provenance are inferred)."""
    schema = records_arrow_schema(fields)
    return {name: schema.field(name).type for name in schema.names if name not in ("metadata", "provenance")}


RECORD_COLUMNS = [
    "item_id",
    "source_id",
    "source_dataset",
    "import_key",
    "text",
    "title",
    "language",
    "domain",
    "metadata",
    "split",
    "near_duplicate_group",
    "image",
    "gold",
    "provenance",
    "gold_revision",
    "schema_version",
    "lexicon_version",
]


def _records_parquet_family(*, project: Project, dest: Path) -> ParquetFamily:
    """records.parquet (every split, no image bytes) and records/<split>.parquet (with the
    redistributable images' bytes in ``image_data``, Hugging Face's Image feature; null for
    the others), from the records as they are written."""

    def image_data(record: dict) -> dict | None:
        name = (record.get("image") or {}).get("file")
        if not name:
            return None  # not redistributable: never shipped, not even inside a Parquet file
        return {"bytes": (dest / name).read_bytes(), "path": name}

    return ParquetFamily(
        whole=(dest / "records.jsonl", dest / "records.parquet"),
        splits={
            split: (dest / split_file("records", split, "jsonl"), dest / split_file("records", split, "parquet"))
            for split in SPLITS
        },
        columns=RECORD_COLUMNS,
        declared=records_declared_types(project.schema["fields"]),
        split_options=SplitOptions(
            extra={"image_data": (IMAGE_DATA_TYPE, image_data)},
            extra_inputs=("image",),
            image_columns=("image_data",),
            group_bytes=IMAGE_GROUP_BYTES,
        ),
    )
