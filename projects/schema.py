"""A project's annotation schema: field specs + the conditional rules between them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from projects.fieldtypes import AGREE, REGISTRY, Context, FieldError, FieldType, SchemaError

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")

DEFAULT_THRESHOLDS = {
    # SPEC section 3 "Disagreement": routing thresholds, overridable per project.
    "entity_f1": 0.7,
    "mention_f1": 0.7,
    "region_iou": 0.75,
    "text_f1": 0.7,
}


@dataclass
class ValidationResult:
    values: dict[str, Any]
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors


class Schema:
    def __init__(self, data: dict):
        if not isinstance(data, dict) or not isinstance(data.get("fields"), list) or not data["fields"]:
            raise SchemaError("a schema is an object with a non-empty list of fields")
        self.data = data
        self.version = data.get("version", 1)
        self.fields: list[dict] = data["fields"]
        self.by_name: dict[str, dict] = {}
        for spec in self.fields:
            name = spec.get("name") if isinstance(spec, dict) else None
            if not isinstance(name, str) or not _NAME.match(name):
                raise SchemaError(f"bad field name {name!r}: lower-case letters, digits and _")
            if name in self.by_name:
                raise SchemaError(f"field {name!r} appears twice")
            if spec.get("type") not in REGISTRY:
                raise SchemaError(f"field {name!r}: unknown type {spec.get('type')!r} (known: {', '.join(REGISTRY)})")
            REGISTRY[spec["type"]].check_spec(spec)
            threshold = spec.get("threshold")
            if threshold is not None and (
                isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1
            ):
                raise SchemaError(f"field {name!r}: threshold must be a number between 0 and 1")
            cond = spec.get("visible_if")
            if cond is not None and (
                not isinstance(cond, dict)
                or cond.get("field") not in self.by_name
                or not isinstance(cond.get("in"), list)
            ):
                raise SchemaError(f"field {name!r}: visible_if must name an earlier field and list values under 'in'")
            self.by_name[name] = spec
        for spec in self.fields:
            target = spec.get("link_to")
            if target is not None and (target not in self.by_name or self.by_name[target]["type"] != spec["type"]):
                raise SchemaError(f"field {spec['name']!r}: link_to must name another field of type {spec['type']!r}")

    def type_of(self, name: str) -> FieldType:
        return REGISTRY[self.by_name[name]["type"]]

    @property
    def names(self) -> list[str]:
        return [s["name"] for s in self.fields]

    def absent_values(self) -> dict[str, Any]:
        return {s["name"]: REGISTRY[s["type"]].absent(s) for s in self.fields}

    def is_visible(self, spec: dict, values: dict) -> bool:
        cond = spec.get("visible_if")
        if cond is None:
            return True
        parent = self.by_name[cond["field"]]
        return self.is_visible(parent, values) and values.get(cond["field"]) in cond["in"]

    def clear_hidden(self, values: dict) -> dict:
        """Replace values of fields hidden by a condition with their absence value.

        The annotation UI does this when an annotator switches to non-harmful; services use it
        for drafts so a hidden leftover never reaches validation as an error.
        """
        out = dict(values)
        for spec in self.fields:
            if not self.is_visible(spec, out):
                out[spec["name"]] = REGISTRY[spec["type"]].absent(spec)
        return out

    def validate(self, values: Any, *, item_text: str = "") -> ValidationResult:
        """Validate a full record. Unknown keys are errors; missing keys count as absent."""
        if not isinstance(values, dict):
            return ValidationResult({}, {"__all__": "the record must be an object"})
        ctx = Context(item_text=item_text or "")
        clean: dict[str, Any] = {}
        errors: dict[str, str] = {}
        unknown = sorted(set(values) - set(self.by_name))
        if unknown:
            errors["__all__"] = f"unknown field(s): {', '.join(unknown)}"
        for spec in self.fields:
            name, ftype = spec["name"], REGISTRY[spec["type"]]
            raw = values.get(name, ftype.absent(spec))
            visible = self.is_visible(spec, clean)
            if ftype.is_absent(spec, raw) or (isinstance(raw, str) and not raw.strip() and ftype.blank_is_absent):
                if visible and spec.get("required"):
                    errors[name] = "is required"
                clean[name] = ftype.absent(spec)
                continue
            if not visible:
                cond = spec["visible_if"]
                errors[name] = f"must be empty unless {cond['field']} is {' or '.join(cond['in'])}"
                clean[name] = ftype.absent(spec)
                continue
            try:
                clean[name] = ftype.validate(spec, raw, ctx)
            except FieldError as exc:
                errors[name] = str(exc)
                clean[name] = ftype.absent(spec)
        for spec in self.fields:  # cross-field rules, once every field is clean
            name = spec["name"]
            if name not in errors:
                problem = REGISTRY[spec["type"]].validate_record(spec, clean[name], clean)
                if problem:
                    errors[name] = problem
        return ValidationResult(clean, errors)

    def normalize_candidate(self, raw: dict, *, item_text: str = "") -> tuple[dict, list[dict]]:
        """Normalize a model's output: keep every valid field, remove (and record) the others.

        Returns (fields, removed) where removed is ``[{"field", "reason", "value"}]``. A field
        that breaks a conditional rule (e.g. a category on a non-harmful candidate) is removed
        too; the candidate itself is never dropped (Meme3W Appendix A.1).
        """
        ctx = Context(item_text=item_text or "")
        out: dict[str, Any] = {}
        removed: list[dict] = []
        for spec in self.fields:
            name, ftype = spec["name"], REGISTRY[spec["type"]]
            if name not in raw:
                removed.append({"field": name, "reason": "missing", "value": None})
                continue
            value = raw[name]
            if ftype.is_absent(spec, value) or (
                isinstance(value, str) and value.strip().lower() in ("", "null", "none")
            ):
                out[name] = ftype.absent(spec)
                continue
            if not self.is_visible(spec, out):
                removed.append({"field": name, "reason": "must be absent given the other fields", "value": value})
                continue
            try:
                clean, notes = ftype.normalize_candidate(spec, value, ctx)
            except FieldError as exc:
                removed.append({"field": name, "reason": str(exc), "value": value})
                continue
            for note in notes:
                removed.append({"field": name, "reason": note, "value": None, "partial": True})
            out[name] = clean
        for spec in self.fields:  # cross-field rules (e.g. checklist links): the field goes, with the reason
            name = spec["name"]
            if name in out:
                problem = REGISTRY[spec["type"]].validate_record(spec, out[name], out)
                if problem:
                    removed.append({"field": name, "reason": problem, "value": out.pop(name)})
        return out, removed

    def compare(
        self, a: dict, b: dict, *, thresholds: dict | None = None, lexicon: dict | None = None
    ) -> dict[str, str]:
        """Per-field agree / minor / disagree between two annotations (SPEC section 3)."""
        th = {**DEFAULT_THRESHOLDS, **(thresholds or {})}
        return {
            s["name"]: REGISTRY[s["type"]].compare(
                s, a.get(s["name"]), b.get(s["name"]), thresholds=th, lexicon=lexicon
            )
            for s in self.fields
        }

    @staticmethod
    def all_agree(comparison: dict[str, str]) -> bool:
        return all(v == AGREE for v in comparison.values())
