"""The schema engine: one registry of field types (SPEC section 2).

A project's schema is data: ``{"version": n, "fields": [spec, ...]}``. Each spec names a field
type from ``REGISTRY``; the type owns everything that depends on the kind of value: what
"absent" is, validation of an annotator's value, lenient normalization of a model's candidate
value, comparison for adjudication, the agreement metric, the widget and the export form.
Adding a field type touches this module only.

Conditional rules are declared on the spec, not coded per preset:

- ``visible_if: {"field": "label", "in": ["harmful"]}``: when the condition is false the field
  must hold its absence value (Meme3W: non-harmful => null target fields and ``[]`` regions).
- ``required: true``: when visible, the field must be present (harmful => category, entity).
- ``exclusive: ["Other"]`` (multichoice): such an option cannot be combined with another
  (AHA-Memes B.1.2).
- ``source: "text"`` (span): the value must be an exact substring of the item text.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

AGREE, MINOR, DISAGREE = "agree", "minor", "disagree"


class FieldError(ValueError):
    """A value that a field type refuses, with a message fit to show beside the field."""


class SchemaError(ValueError):
    """A schema definition that cannot be used."""


@dataclass(frozen=True)
class Context:
    """What validation may need to know about the item being annotated."""

    item_text: str = ""


class FieldType:
    name: ClassVar[str]
    widget: ClassVar[str]
    #: Name of the agreement metric used for this field type in reports (metrics/ package).
    metric: ClassVar[str]
    #: Key in the project's thresholds dict used for the disagreement rule, if any.
    threshold_key: ClassVar[str | None] = None

    def check_spec(self, spec: dict) -> None:
        """Raise SchemaError when ``spec`` is not usable for this type."""

    def absent(self, spec: dict) -> Any:
        return None

    def is_absent(self, spec: dict, value: Any) -> bool:
        return value is None

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        """Return the clean value or raise FieldError. Absent values are handled by the caller."""
        raise NotImplementedError

    def normalize_candidate(self, spec: dict, value: Any, ctx: Context) -> tuple[Any, list[str]]:
        """Lenient normalization of a model's value: (clean value, notes on dropped parts).

        Raises FieldError when nothing of the value can be kept: the caller removes the field
        (never the whole candidate) and records the message.
        """
        return self.validate(spec, value, ctx), []

    def compare(self, spec: dict, a: Any, b: Any, *, thresholds: dict, lexicon: dict | None) -> str:
        """agree / minor (within the project's threshold) / disagree."""
        if self.is_absent(spec, a) and self.is_absent(spec, b):
            return AGREE
        if self.is_absent(spec, a) != self.is_absent(spec, b):
            return DISAGREE  # presence mismatch on an optional field (SPEC section 3)
        if self.canonical(spec, a) == self.canonical(spec, b):
            return AGREE
        score = self.similarity(spec, a, b, lexicon=lexicon)
        if score is None or self.threshold_key is None:
            return DISAGREE
        return MINOR if score >= thresholds[self.threshold_key] else DISAGREE

    def canonical(self, spec: dict, value: Any) -> Any:
        return value

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        return None

    def auto_merge(self, spec: dict, values: list, *, rules: set[str], lexicon: dict | None) -> tuple[Any, str] | None:
        """Merge minor differences by a project-enabled rule: (value, rule name) or None."""
        return None

    def export(self, spec: dict, value: Any) -> Any:
        return value

    def arrow_type(self):
        """The Parquet column type of this field in releases (pyarrow imported lazily)."""
        import pyarrow as pa

        return pa.string()


def _clean_string(value: Any, *, max_length: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise FieldError("must be text")
    if "\x00" in value:
        raise FieldError("contains a NUL character")
    value = value.strip()
    if not value:
        return None
    if len(value) > max_length:
        raise FieldError(f"is longer than {max_length} characters")
    return value


class ChoiceType(FieldType):
    name = "choice"
    widget = "radio"
    metric = "cohen_kappa"

    def check_spec(self, spec: dict) -> None:
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices):
            raise SchemaError(f"field {spec.get('name')!r}: choices must be a non-empty list of strings")
        if len(set(choices)) != len(choices):
            raise SchemaError(f"field {spec.get('name')!r}: choices repeat")

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        if value not in spec["choices"]:
            raise FieldError(f"must be one of: {', '.join(spec['choices'])}")
        return value

    def normalize_candidate(self, spec: dict, value: Any, ctx: Context) -> tuple[Any, list[str]]:
        if isinstance(value, str):
            folded = {c.casefold().replace("_", " ").replace("-", " "): c for c in spec["choices"]}
            key = " ".join(value.strip().casefold().replace("_", " ").replace("-", " ").split())
            if key in folded:
                return folded[key], []
        return self.validate(spec, value, ctx), []


class MultiChoiceType(FieldType):
    name = "multichoice"
    widget = "checkboxes"
    metric = "macro_pairwise_kappa"

    def arrow_type(self):
        import pyarrow as pa

        return pa.list_(pa.string())

    def check_spec(self, spec: dict) -> None:
        ChoiceType().check_spec(spec)
        exclusive = spec.get("exclusive", [])
        if not isinstance(exclusive, list) or any(e not in spec["choices"] for e in exclusive):
            raise SchemaError(f"field {spec.get('name')!r}: exclusive options must be among the choices")

    def absent(self, spec: dict) -> Any:
        return []

    def is_absent(self, spec: dict, value: Any) -> bool:
        return value is None or value == []

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise FieldError("must be a list of options")
        unknown = [v for v in value if v not in spec["choices"]]
        if unknown:
            raise FieldError(f"unknown option(s): {', '.join(unknown)}")
        # Stored in the schema's order so that equal sets compare equal.
        chosen = [c for c in spec["choices"] if c in set(value)]
        for option in spec.get("exclusive", []):
            if option in chosen and len(chosen) > 1:
                raise FieldError(f"“{option}” cannot be combined with another option")
        return chosen

    def normalize_candidate(self, spec: dict, value: Any, ctx: Context) -> tuple[Any, list[str]]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise FieldError("must be a list of options")
        choice = ChoiceType()
        kept, notes = [], []
        for v in value:
            try:
                kept.append(choice.normalize_candidate(spec, v, ctx)[0])
            except FieldError:
                notes.append(f"dropped unknown option {v!r}")
        return self.validate(spec, kept, ctx), notes

    def canonical(self, spec: dict, value: Any) -> Any:
        return frozenset(value or [])


class EntityType(FieldType):
    name = "entity"
    widget = "entity"
    metric = "f1_rel"
    threshold_key = "entity_f1"
    max_length = 200

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        clean = _clean_string(value, max_length=spec.get("max_length", self.max_length))
        if clean is None:
            raise FieldError("is empty")
        return clean

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        # Same canonical form (paper Table 8 "Yes" pairs) scores 1.0: a minor difference, which
        # the "entity_canonical" auto-merge rule can settle without a reviewer.
        from metrics.entity import f1_rel

        return f1_rel(a, b, lexicon)

    def auto_merge(self, spec: dict, values: list, *, rules: set[str], lexicon: dict | None) -> tuple[Any, str] | None:
        if "entity_canonical" not in rules or any(v is None for v in values):
            return None
        from metrics.entity import canonicalize

        if len({canonicalize(v, lexicon) for v in values}) != 1:
            return None
        # The surface form most annotators wrote; ties go to the first annotator.
        best = max(values, key=lambda v: (values.count(v), -values.index(v)))
        return best, "entity_canonical"


class SpanType(FieldType):
    name = "span"
    widget = "span"
    metric = "token_f1"
    threshold_key = "mention_f1"

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        if value is None:
            raise FieldError("is empty")
        if not isinstance(value, str):
            raise FieldError("must be text")
        if not value.strip():
            raise FieldError("is empty")
        # Exact copy (Meme3W guideline 4): no stripping, no case folding.
        if value not in ctx.item_text:
            raise FieldError("must be copied exactly from the item text")
        return value

    def normalize_candidate(self, spec: dict, value: Any, ctx: Context) -> tuple[Any, list[str]]:
        if isinstance(value, str) and value not in ctx.item_text and value.strip() in ctx.item_text:
            return self.validate(spec, value.strip(), ctx), ["stripped surrounding whitespace"]
        return self.validate(spec, value, ctx), []

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        from metrics.text import token_f1

        return token_f1(a, b)


class BoxesType(FieldType):
    name = "boxes"
    widget = "boxes"
    metric = "enclosing_iou"
    threshold_key = "region_iou"
    scale = 1000
    max_boxes = 50

    def arrow_type(self):
        import pyarrow as pa

        return pa.list_(pa.list_(pa.int32()))

    def absent(self, spec: dict) -> Any:
        return []

    def is_absent(self, spec: dict, value: Any) -> bool:
        return value is None or value == []

    def _box(self, box: Any, *, lenient: bool) -> list[int]:
        if not isinstance(box, (list, tuple)) or len(box) != 4:
            raise FieldError("each box must be [x1, y1, x2, y2]")
        coords = []
        for c in box:
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c):
                raise FieldError("box coordinates must be numbers")
            if isinstance(c, float):
                if not lenient and not c.is_integer():
                    raise FieldError("box coordinates must be integers")
                c = int(round(c))
            coords.append(int(c))
        x1, y1, x2, y2 = coords
        if not all(0 <= c <= self.scale for c in coords):
            raise FieldError(f"box coordinates must lie in [0, {self.scale}]")
        if not (x1 < x2 and y1 < y2):
            raise FieldError("a box needs x1 < x2 and y1 < y2")
        return coords

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        if not isinstance(value, list):
            raise FieldError("must be a list of boxes")
        if len(value) > spec.get("max_boxes", self.max_boxes):
            raise FieldError(f"at most {spec.get('max_boxes', self.max_boxes)} boxes")
        return [self._box(b, lenient=False) for b in value]

    def normalize_candidate(self, spec: dict, value: Any, ctx: Context) -> tuple[Any, list[str]]:
        if isinstance(value, (list, tuple)) and len(value) == 4 and all(
            isinstance(c, (int, float)) and not isinstance(c, bool) for c in value
        ):
            value = [list(value)]  # a single bare box
        if not isinstance(value, list):
            raise FieldError("must be a list of boxes")
        kept, notes = [], []
        for i, box in enumerate(value[: spec.get("max_boxes", self.max_boxes)]):
            # Other conventions (0-1 floats, pixels) are not guessed at (SPEC section 1, step 1).
            if (
                isinstance(box, (list, tuple))
                and len(box) == 4
                and all(isinstance(c, float) for c in box)
                and all(0.0 <= c <= 1.0 for c in box)
                and any(not float(c).is_integer() for c in box)
            ):
                notes.append(f"box {i}: looks like 0-1 coordinates, dropped (not rescaled)")
                continue
            try:
                kept.append(self._box(box, lenient=True))
            except FieldError as exc:
                notes.append(f"box {i}: {exc}, dropped")
        if value and not kept:
            raise FieldError("no valid box: " + "; ".join(notes))
        return kept, notes

    def canonical(self, spec: dict, value: Any) -> Any:
        return sorted(tuple(b) for b in value or [])

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        from metrics.boxes import enclosing_iou

        return enclosing_iou(a, b)

    def auto_merge(self, spec: dict, values: list, *, rules: set[str], lexicon: dict | None) -> tuple[Any, str] | None:
        """``boxes_mean``: same number of boxes, matched one-to-one by IoU (Hungarian), averaged."""
        if "boxes_mean" not in rules or not values or any(not v for v in values):
            return None
        if len({len(v) for v in values}) != 1:
            return None
        import numpy as np
        from scipy.optimize import linear_sum_assignment

        from metrics.boxes import iou

        base = values[0]
        stacked = [np.array(base, dtype=float)]
        for other in values[1:]:
            cost = np.array([[-iou(a, b) for b in other] for a in base])
            rows, cols = linear_sum_assignment(cost)
            if any(-cost[r, c] < 0.5 for r, c in zip(rows, cols)):
                return None  # some box has no counterpart: not a minor difference to average
            stacked.append(np.array([other[c] for c in cols], dtype=float)[np.argsort(rows)])
        mean = np.rint(np.mean(stacked, axis=0)).astype(int).tolist()
        return [self._box(b, lenient=True) for b in mean], "boxes_mean"


class FreeTextType(FieldType):
    name = "text"
    widget = "textarea"
    metric = "token_f1"
    threshold_key = "text_f1"
    max_length = 5000

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        clean = _clean_string(value, max_length=spec.get("max_length", self.max_length))
        if clean is None:
            raise FieldError("is empty")
        return clean

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        from metrics.text import token_f1

        return token_f1(a, b)


class TextListType(FieldType):
    name = "textlist"
    widget = "textlist"
    metric = "token_f1"
    threshold_key = "text_f1"
    max_items = 50
    max_length = 2000

    def arrow_type(self):
        import pyarrow as pa

        return pa.list_(pa.string())

    def absent(self, spec: dict) -> Any:
        return []

    def is_absent(self, spec: dict, value: Any) -> bool:
        return value is None or value == []

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        if not isinstance(value, list):
            raise FieldError("must be a list of texts")
        if len(value) > spec.get("max_items", self.max_items):
            raise FieldError(f"at most {spec.get('max_items', self.max_items)} entries")
        cleaned = []
        for i, v in enumerate(value):
            try:
                c = _clean_string(v, max_length=spec.get("max_length", self.max_length))
            except FieldError as exc:
                raise FieldError(f"entry {i + 1} {exc}") from exc
            if c is not None:
                cleaned.append(c)
        return cleaned

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        from metrics.text import token_f1

        return token_f1(" ".join(a), " ".join(b))


REGISTRY: dict[str, FieldType] = {
    t.name: t
    for t in (ChoiceType(), MultiChoiceType(), EntityType(), SpanType(), BoxesType(), FreeTextType(), TextListType())
}
