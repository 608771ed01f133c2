"""croissant.json: the release described in Croissant 1.0 (JSON-LD, MLCommons) with the
Responsible-AI vocabulary (RAI 1.0) where the project's release settings or the data say it.

Generated from the same manifest as the card, so both say the same thing. Record sets read the
whole-release JSONL files (every split, ``split`` a field), one field per column and one per
gold field (``jsonPath``), so ``mlcroissant.Dataset("croissant.json").records("records")``
yields the records. Validated and loaded in exports/tests/test_ecosystem.py.
"""

from __future__ import annotations

CONTEXT = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}

MEDIA = {
    "jsonl": "application/jsonlines",
    "parquet": "application/x-parquet",
    "json": "application/json",
    "md": "text/markdown",
    "txt": "text/plain",
}

#: (column, Croissant data type) of each record set; nested values are JSON-path fields.
RECORD_FIELDS = (
    ("item_id", "sc:Integer"),
    ("source_id", "sc:Text"),
    ("source_dataset", "sc:Text"),
    ("text", "sc:Text"),
    ("title", "sc:Text"),
    ("language", "sc:Text"),
    ("split", "sc:Text"),
    ("near_duplicate_group", "sc:Integer"),
    ("image.sha256", "sc:Text"),
    ("image.file", "sc:Text"),
    ("image.width", "sc:Integer"),
    ("image.height", "sc:Integer"),
    ("image.redistributable", "sc:Boolean"),
)
ANNOTATION_FIELDS = (
    ("item_id", "sc:Integer"),
    ("split", "sc:Text"),
    ("annotator", "sc:Text"),
    ("kind", "sc:Text"),
    ("submission_order", "sc:Integer"),
    ("submitted_at", "sc:DateTime"),
    ("schema_version", "sc:Integer"),
    ("guideline_version", "sc:Integer"),
)
CANDIDATE_FIELDS = (
    ("item_id", "sc:Integer"),
    ("split", "sc:Text"),
    ("candidate_id", "sc:Integer"),
    ("provider", "sc:Text"),
    ("model_name", "sc:Text"),
    ("prompt_version", "sc:Text"),
)


def _file_object(name: str, digest) -> dict:
    return {
        "@type": "cr:FileObject",
        "@id": name,
        "name": name,
        "contentUrl": name,
        "contentSize": f"{digest.bytes} B",
        "encodingFormat": MEDIA.get(name.rsplit(".", 1)[-1], "application/octet-stream"),
        "sha256": digest.sha256,
    }


def _field(record_set: str, file_id: str, column: str, data_type: str, description: str = "") -> dict:
    name = column.replace(".", "_")
    top, _, inner = column.partition(".")
    source: dict = {"fileObject": {"@id": file_id}, "extract": {"column": top}}
    if inner:
        source["transform"] = {"jsonPath": inner}  # a key of a nested object
    out = {"@type": "cr:Field", "@id": f"{record_set}/{name}", "name": name, "dataType": data_type, "source": source}
    if description:
        out["description"] = description
    return out


def _gold_type(spec: dict) -> str | None:
    """Croissant type of a gold field read as one value; None: a list (kept out of the record
    set, its values are in the JSONL and Parquet files)."""
    return None if spec["type"] in ("boxes", "multichoice", "textlist", "pairlist", "checklist") else "sc:Text"


def croissant(*, manifest: dict, digests: dict) -> dict:
    card = manifest["card"]
    c = manifest["counts"]
    p = manifest["project"]
    files = [_file_object(name, d) for name, d in sorted(digests.items()) if not name.startswith("images/")]
    gold_fields = []
    references = set(manifest.get("reference_fields") or [])
    for spec in manifest["schema"]["fields"]:
        t = _gold_type(spec)
        if t is None:
            continue
        described = spec.get("label") or spec["name"]
        field = _field("records", "records.jsonl", f"gold.{spec['name']}", t, described)
        if spec["name"] in references:
            field["repeated"] = True  # every annotator's value, in order of submission
            field["description"] = f"{described} (one per annotator: references are kept, not adjudicated)"
        gold_fields.append(field)
    record_sets = [
        {
            "@type": "cr:RecordSet",
            "@id": "records",
            "name": "records",
            "description": "One adjudicated gold record per meme (all splits; see the split field).",
            "key": {"@id": "records/item_id"},
            "field": [_field("records", "records.jsonl", col, t) for col, t in RECORD_FIELDS] + gold_fields,
        },
        {
            "@type": "cr:RecordSet",
            "@id": "annotations",
            "name": "annotations",
            "description": "Raw per-annotator records before adjudication, pseudonymous.",
            "field": [_field("annotations", "annotations.jsonl", col, t) for col, t in ANNOTATION_FIELDS],
        },
        {
            "@type": "cr:RecordSet",
            "@id": "candidates",
            "name": "candidates",
            "description": "Model candidates with their model names.",
            "field": [_field("candidates", "candidates.jsonl", col, t) for col, t in CANDIDATE_FIELDS],
        },
    ]
    description = card.get("summary") or (
        f"{p['name']}: {c['records']} memes (image + text) annotated with the {p['preset'] or 'custom'} schema, "
        "adjudicated gold, raw annotations and model candidates."
    )
    doc = {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": ["http://mlcommons.org/croissant/1.0", "http://mlcommons.org/croissant/RAI/1.0"],
        "name": card["pretty_name"],
        "description": description,
        "datePublished": manifest["data_as_of"],
        "license": card.get("license_url") or card.get("license") or "other",
        "url": card.get("homepage")
        or f"https://concord.invalid/p/{p['slug']}/releases/v{manifest.get('release_number', 1)}/",
        "citeAs": card.get("citation") or f"{card['pretty_name']}, release v{manifest.get('release_number', 1)}.",
        "creator": [{"@type": "sc:Person", "name": name} for name in card.get("creators", [])],
        "keywords": ["memes", "multimodal", p["preset"] or "custom"],
        "inLanguage": card.get("languages") or [],
        "isLiveDataset": False,
        "distribution": files,
        "recordSet": record_sets,
        # Responsible AI (RAI 1.0): from the release settings, and what Concord knows itself.
        "rai:dataCollection": card.get("collection") or "Not stated by the dataset's maintainers.",
        "rai:dataCollectionType": ["Manual Human Curation"],
        "rai:dataAnnotationProtocol": (
            f"Each item annotated independently by {manifest['annotators_per_item']} distinct annotators following "
            "guideline.md, with anonymized model candidates as editable references; disagreements adjudicated by a "
            "reviewer who did not annotate the item; identical annotations become gold. Candidate-blind audit in "
            "audit.json, agreement before adjudication in agreement.json."
        ),
        "rai:dataAnnotationPlatform": ["Concord"],
        "rai:annotationsPerItem": str(manifest["annotators_per_item"]),
        "rai:annotatorDemographics": [card.get("annotators") or "Not stated by the dataset's maintainers."],
        "rai:dataPreprocessingProtocol": [
            "Exact pixel duplicates removed (earliest copy kept).",
            "Perceptual-hash near-duplicate groups kept within one split.",
            "Model candidates normalized to the schema; malformed fields removed.",
        ],
        "rai:dataUseCases": [card.get("intended_uses") or "Not stated by the dataset's maintainers."],
        "rai:dataLimitations": [card.get("limitations") or "Not stated by the dataset's maintainers."],
        "rai:dataBiases": [card.get("limitations") or "Not stated by the dataset's maintainers."],
        "rai:personalSensitiveInformation": [
            card.get("personal_information") or "Not stated by the dataset's maintainers."
        ],
        "rai:dataSocialImpact": card.get("content_warning") or "",
        "rai:dataReleaseMaintenancePlan": card.get("maintenance") or "Not stated by the dataset's maintainers.",
    }
    if card.get("prohibited_uses"):
        doc["rai:dataUseCases"].append("Not for: " + card["prohibited_uses"])
    return doc
