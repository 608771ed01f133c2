"""A schema's evaluation plan: what metrics.evaluation scores, as data (SPEC section 6).

Each field type declares its own entry (``FieldType.evaluation``); the preset adds its binary
labels, composites (Meme3W JRA), column order, ranking figure and breakdowns
(``projects.presets.*_EVALUATION``). Nobody switches on a preset or a widget: a custom schema
gets every field type's figures and no composite. The release build writes the plan as
``evaluation.json`` next to ``evaluate.py``, so the offline scorer reads the same plan.
"""

from __future__ import annotations

from metrics.evaluation import CHECKLIST_JUDGES, PLAN_FORMAT, PLAN_VERSION
from projects.fieldtypes import REGISTRY
from projects.presets import PRESETS


def evaluation_plan(
    *, schema: dict, preset: str, reference_fields: list[str] | tuple[str, ...] = (), release: dict | None = None
) -> dict:
    """The plan for ``schema`` (a project schema dict: ``{"version", "fields"}``).

    ``reference_fields``: fields whose gold is a list of kept references (projects.workflow).
    ``release``: ``{"project": slug, "version": n}``, checked against a predictions file's
    optional header so a file for another release is refused.
    """
    conf = PRESETS.get(preset, {}).get("evaluation", {})
    if conf.get("kind") == CHECKLIST_JUDGES:
        return _checklist_judges_plan(schema=schema, preset=preset, conf=conf, release=release)
    binary = conf.get("binary", {})
    refs = set(reference_fields)
    fields = []
    for spec in schema.get("fields", []):
        entry = REGISTRY[spec["type"]].evaluation(spec, references=spec["name"] in refs)
        if entry is None:
            continue
        if spec["name"] in binary and binary[spec["name"]] in entry.get("choices", ()):
            entry["positive"] = binary[spec["name"]]
        fields.append(entry)
    names = {f["name"] for f in fields}
    composites = [
        c for c in conf.get("composites", []) if c["label"] in names and all(f in names for f, _ in c["fields"])
    ]
    breakdowns = [d for d in conf.get("breakdowns", ["source_dataset", "language"]) if _dimension_ok(d, names)]
    plan = {
        "format": PLAN_FORMAT,
        "version": PLAN_VERSION,
        "schema_version": schema.get("version"),
        "preset": preset,
        "fields": fields,
        "composites": composites,
        "order": list(conf.get("order", [])),
        "primary": conf.get("primary") if composites or not conf.get("composites") else None,
        "breakdowns": breakdowns,
    }
    if release:
        plan["release"] = dict(release)
    return plan


def _dimension_ok(dim: str, names: set[str]) -> bool:
    return not dim.startswith("gold.") or dim[5:] in names


def _checklist_judges_plan(*, schema: dict, preset: str, conf: dict, release: dict | None) -> dict:
    """MemeBench VIKR: a prediction is a free-text explanation, scored by LLM judges against
    the gold checklists of the plan's layers (``[letter, checklist field]``, the fields the
    schema holds as checklists). The reference explanation, language and domain are not
    scored (metadata: breakdowns only)."""
    types = {f["name"]: f["type"] for f in schema.get("fields", [])}
    layers = [[letter, name] for letter, name in conf.get("layers", []) if types.get(name) == "checklist"]
    judges = int(conf.get("judges") or 2)
    plan = {
        "format": PLAN_FORMAT,
        "version": PLAN_VERSION,
        "kind": CHECKLIST_JUDGES,
        "schema_version": schema.get("version"),
        "preset": preset,
        "layers": layers,
        "judges": judges,
        "fields": [
            {"name": "explanation", "kind": "explanation", "label": "Explanation"},
            {"name": "judgements", "kind": "judgements", "label": "Judges' decisions", "judges": judges},
        ],
        "composites": [],
        "order": list(conf.get("order", [])),
        "primary": conf.get("primary"),
        "breakdowns": [d for d in conf.get("breakdowns", []) if not d.startswith("gold.") or d[5:] in types],
    }
    if release:
        plan["release"] = dict(release)
    return plan
