"""records.jsonl / records.parquet / coco.json / images: one pass over the released gold."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from exports.build.ticker import READ_CHUNK, _Ticker
from exports.selectors import (
    SplitPlan,
    coco_fields,
    released_gold_queryset,
)
from exports.writers import (
    UNSPECIFIED_CATEGORY,
    CocoWriter,
    JsonlWriter,
    ParquetRecordsWriter,
    link_or_copy,
)
from projects.fieldtypes import REGISTRY
from projects.imaging import image_path
from projects.models import Project


def _pseudonymize_provenance(provenance: dict, pseudonyms: dict) -> dict:
    """Gold provenance with the reviewer's user id replaced by their pseudonym."""
    out = {}
    for name, entry in (provenance or {}).items():
        if isinstance(entry, dict) and "decided_by" in entry:
            entry = {**entry, "decided_by": pseudonyms.get(("reviewer", entry["decided_by"]))}
        out[name] = entry
    return out


def _image_entry(item, included: bool) -> dict:
    ext = item.image.rsplit(".", 1)[-1]
    return {
        "file": f"images/{item.image_sha256}.{ext}" if included else None,
        "format": item.image_format,
        "height": item.height,
        "phash": item.phash,
        "pixel_hash": item.pixel_hash,
        "redistributable": item.redistributable,
        "sha256": item.image_sha256,
        "width": item.width,
    }


def _gold_value(f: dict, values: dict, references: frozenset[str]):
    """A field's export form; a field kept as references (projects.workflow) is the list of
    every annotator's value, each in the type's export form."""
    ftype = REGISTRY[f["type"]]
    if f["name"] in references:
        kept = values.get(f["name"])
        return [ftype.export(f, v) for v in kept] if isinstance(kept, list) else []
    return ftype.export(f, values.get(f["name"], ftype.absent(f)))


def _record(
    *,
    gold,
    item,
    split: str,
    group: int,
    fields: list[dict],
    pseudonyms: dict,
    image: dict,
    references: frozenset[str] = frozenset(),
) -> dict:
    values = gold.values or {}
    return {
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
        "near_duplicate_group": group,
        "image": image,
        "gold": {f["name"]: _gold_value(f, values, references) for f in fields},
        "provenance": _pseudonymize_provenance(gold.provenance, pseudonyms),
        "gold_revision": gold.revision,
        "schema_version": gold.schema_version,
        "lexicon_version": gold.lexicon_version,
    }


def _write_records(*, project: Project, plan: SplitPlan, dest: Path, pseudonyms: dict, tick: _Ticker) -> dict:
    """records.jsonl, records.parquet, coco.json, images/ and images.jsonl in one pass."""
    fields = project.schema["fields"]
    references = frozenset(project.get_workflow().reference_fields())
    boxes_field, category_field = coco_fields(project.schema)
    jsonl = JsonlWriter(dest / "records.jsonl")
    parquet = ParquetRecordsWriter(dest / "records.parquet", fields, references=references)
    images_index = JsonlWriter(dest / "images.jsonl")
    (dest / "images").mkdir()
    coco = None
    if boxes_field is not None:
        categories = list(category_field["choices"]) if category_field else []
        if category_field is None or not category_field.get("required"):
            categories.append(UNSPECIFIED_CATEGORY)
        coco = CocoWriter(
            dest / "coco.json",
            categories=categories,
            info={
                "description": f"{project.name}: boxes of field {boxes_field['name']!r}"
                + (f", categories from {category_field['name']!r}" if category_field else ""),
                "box_field": boxes_field["name"],
                "category_field": category_field["name"] if category_field else None,
                "bbox": "pixels [x, y, width, height]; bbox_normalized_1000 = [x1, y1, x2, y2] in [0, 1000]",
            },
        )
    counts = {
        "by_split": Counter(),
        "gold": {f["name"]: Counter() for f in fields if "counted" in REGISTRY[f["type"]].roles},
        "images_included": 0,
        "images_referenced": 0,
        "boxes": 0,
    }
    data_as_of = None
    done = 0
    qs = released_gold_queryset(project=project).select_related("item").order_by("item_id")
    try:
        for gold in qs.iterator(chunk_size=READ_CHUNK):
            item = gold.item
            split = plan.split_of(item.pk)
            if split is None:
                continue  # an exact duplicate removed by the plan, or gold that appeared meanwhile
            included = bool(item.redistributable)
            image = _image_entry(item, included)
            if included:
                src = image_path(item.image)
                link_or_copy(src, dest / image["file"])
                images_index.write(
                    {
                        "file": image["file"],
                        "sha256": item.image_sha256,
                        "bytes": src.stat().st_size,
                        "item_id": item.pk,
                    }
                )
                counts["images_included"] += 1
            else:
                counts["images_referenced"] += 1
            record = _record(
                gold=gold,
                item=item,
                split=split,
                group=plan.group_of_item(item.pk),
                fields=fields,
                pseudonyms=pseudonyms,
                image=image,
                references=references,
            )
            jsonl.write(record)
            parquet.write(record)
            if coco is not None:
                boxes = record["gold"].get(boxes_field["name"]) or []
                category = record["gold"].get(category_field["name"]) if category_field else None
                coco.add(
                    image={
                        "id": item.pk,
                        "file_name": image["file"] or f"sha256:{item.image_sha256}",
                        "width": item.width,
                        "height": item.height,
                        "sha256": item.image_sha256,
                        "source_id": item.source_id,
                        "split": split,
                        "included": included,
                    },
                    boxes=boxes,
                    category=category,
                )
                counts["boxes"] += len(boxes)
            counts["by_split"][split] += 1
            for name, counter in counts["gold"].items():
                counter[str(record["gold"].get(name))] += 1
            if data_as_of is None or gold.created_at > data_as_of:
                data_as_of = gold.created_at
            done += 1
            tick("records", done)
    except BaseException:
        if coco is not None:
            coco.abort()
        raise
    digests = {"records.jsonl": jsonl.close(), "records.parquet": parquet.close(), "images.jsonl": images_index.close()}
    if coco is not None:
        digests["coco.json"] = coco.close()
    counts["records"] = done
    counts["data_as_of"] = data_as_of
    counts["digests"] = digests
    return counts
