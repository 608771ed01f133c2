"""The schema engine: one registry of field types (SPEC section 2; CONVENTIONS "schema engine").

A project's schema is data: ``{"version": n, "fields": [spec, ...]}``. Each spec names a field
type from ``REGISTRY``; the type owns everything that depends on the kind of value, and every
caller asks the type instead of switching on its name:

- values: what "absent" is, validation of an annotator's value, a draft's shape check, the
  cross-field check of a whole record (checklist links), lenient normalization of a model's
  candidate value;
- adjudication: comparison (agree / minor / disagree with the project threshold), auto-merge;
- agreement: ``agreement`` (the family of figures and how they are reported) plus
  ``agreement_value`` and ``pair_scores`` (the batch similarity of paired values);
- display: ``display_text``; the widget: ``templates/fields/<widget>.html`` and one entry in
  ``static/fields/widgets.js``;
- exports: ``export`` and ``arrow_type`` (the Parquet column), ``roles`` (what the type is in a
  record: a stratum, the COCO region, a grounding condition, ...);
- candidates: ``prompt_value`` / ``prompt_example`` (how the value is described to a model);
- the schema editor: ``label``, ``spec_keys`` (what a spec of the type may set).

Adding a field type: one class here, one template, one JS entry; ``projects/tests/test_registry.py``
walks the registry and names what is missing.

Conditional rules are declared on the spec, not coded per preset:

- ``visible_if: {"field": "label", "in": ["harmful"]}``: when the condition is false the field
  must hold its absence value (Meme3W: non-harmful => null target fields and ``[]`` regions).
- ``required: true``: when visible, the field must be present (harmful => category, entity).
- ``exclusive: ["Other"]`` (multichoice): such an option cannot be combined with another
  (AHA-Memes B.1.2).
- ``source: "text"`` (span): the value must be an exact substring of the item text.
- ``link_to: "visual"`` (checklist): items may name an item id of that checklist field; a link
  to a missing id is an error (MemeBench VIKR: Identity items name the Visual item they identify).
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from scipy.optimize import linear_sum_assignment

from metrics.boxes import enclosing_iou, enclosing_iou_batch, iou
from metrics.entity import canonicalize, f1_rel, f1_rel_batch
from metrics.text import normalize, token_f1, token_f1_batch

AGREE, MINOR, DISAGREE = "agree", "minor", "disagree"

#: Families of agreement figures (quality.compute computes each family once, for any type).
CATEGORICAL, MULTILABEL, CONTINUOUS = "categorical", "multilabel", "continuous"


class FieldError(ValueError):
    """A value that a field type refuses, with a message fit to show beside the field."""


class SchemaError(ValueError):
    """A schema definition that cannot be used."""


@dataclass(frozen=True)
class Context:
    """What validation may need to know about the item being annotated."""

    item_text: str = ""


@dataclass(frozen=True)
class Agreement:
    """How a type's inter-annotator agreement is computed and reported.

    ``family``: categorical (Cohen's kappa, Krippendorff's alpha), multilabel (per-label kappa
    macro-averaged over labels and annotator pairs) or continuous (a per-pair similarity in
    [0, 1]: its mean and the shares at or above ``shares``). ``metric`` is the stable name in
    reports; ``label`` names the primary figure; ``primary`` is its key for continuous types.
    """

    family: str
    metric: str
    label: str
    measure: str = ""
    shares: tuple[float, ...] = ()
    primary: str = "mean"


#: Structural bounds of a draft value (drafts may be incomplete, never malformed or huge).
MAX_DRAFT_TEXT = 20_000
MAX_DRAFT_LIST = 200
#: Keys every spec may carry, whatever its type.
COMMON_SPEC_KEYS = ("name", "type", "label", "help", "required", "visible_if", "threshold")


def _text_shape_error(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be text"
    if len(value) > MAX_DRAFT_TEXT:
        return f"is longer than {MAX_DRAFT_TEXT} characters"
    if "\x00" in value:
        return "contains a NUL character"
    return None


def _text_list_shape_error(value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(v, str) and len(v) <= MAX_DRAFT_TEXT for v in value):
        return "must be a list of texts"
    if len(value) > MAX_DRAFT_LIST:
        return f"has more than {MAX_DRAFT_LIST} entries"
    return None


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


def _equal_scores(a: Sequence[Any], b: Sequence[Any]) -> np.ndarray:
    return np.fromiter((1.0 if x == y else 0.0 for x, y in zip(a, b)), dtype=np.float64, count=len(a))


def _best_match(scores: np.ndarray) -> float:
    """Symmetric best-match mean of a (k, m) similarity matrix: one-to-one assignment that
    maximizes the total, divided by the larger count (unmatched entries score 0)."""
    k, m = scores.shape
    if k == 0 and m == 0:
        return 1.0
    if k == 0 or m == 0:
        return 0.0
    rows, cols = linear_sum_assignment(-scores)
    return float(scores[rows, cols].sum() / max(k, m))


class FieldType:
    name: ClassVar[str]
    widget: ClassVar[str]
    #: Shown in the schema editor's type list.
    label: ClassVar[str]
    agreement: ClassVar[Agreement]
    #: Key in the project's thresholds dict used for the disagreement rule, if any.
    threshold_key: ClassVar[str | None] = None
    #: What a value of the type is in a record: "stratum" (split strata and the audit category),
    #: "category" (COCO categories), "region" (COCO boxes), "grounding" (audit strata: present /
    #: absent), "mention" (highlighted in the item text), "dictionary" (repeats: Parquet
    #: dictionary encoding), "counted" (value counts in the release manifest).
    roles: ClassVar[frozenset[str]] = frozenset()
    #: Type-specific keys a spec may carry (besides COMMON_SPEC_KEYS).
    spec_keys: ClassVar[tuple[str, ...]] = ()
    #: A whitespace-only text counts as absent (not for an exact-copy span, where it is an error).
    blank_is_absent: ClassVar[bool] = True

    @property
    def template(self) -> str:
        return f"fields/{self.widget}.html"

    # ------------------------------------------------------------------ values

    def check_spec(self, spec: dict) -> None:
        """Raise SchemaError when ``spec`` is not usable for this type."""

    def absent(self, spec: dict) -> Any:
        return None

    def is_absent(self, spec: dict, value: Any) -> bool:
        return value is None

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        """Return the clean value or raise FieldError. Absent values are handled by the caller."""
        raise NotImplementedError

    def validate_record(self, spec: dict, value: Any, record: dict) -> str | None:
        """Cross-field check once every field is clean (e.g. links to another field): a message or None."""
        return None

    def shape_error(self, spec: dict, value: Any) -> str | None:
        """Structural check of a draft value (None is always fine): a message, or None."""
        return _text_shape_error(value)

    def normalize_candidate(self, spec: dict, value: Any, ctx: Context) -> tuple[Any, list[str]]:
        """Lenient normalization of a model's value: (clean value, notes on dropped parts).

        Raises FieldError when nothing of the value can be kept: the caller removes the field
        (never the whole candidate) and records the message.
        """
        return self.validate(spec, value, ctx), []

    # ------------------------------------------------------------------ adjudication

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
        threshold = spec.get("threshold", thresholds[self.threshold_key])
        return MINOR if score >= threshold else DISAGREE

    def canonical(self, spec: dict, value: Any) -> Any:
        return value

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        return None

    def auto_merge(self, spec: dict, values: list, *, rules: set[str], lexicon: dict | None) -> tuple[Any, str] | None:
        """Merge minor differences by a project-enabled rule: (value, rule name) or None."""
        return None

    # ------------------------------------------------------------------ agreement

    def agreement_value(self, spec: dict, value: Any) -> Any:
        """A stored value as the agreement computation compares it (malformed -> absent)."""
        return value if isinstance(value, str) and value != "" else None

    def pair_scores(self, spec: dict, a: Sequence[Any], b: Sequence[Any], *, lexicon: dict | None) -> np.ndarray:
        """Similarity in [0, 1] of each pair of agreement values (batch form)."""
        return _equal_scores(a, b)

    # ------------------------------------------------------------------ display, export, prompt

    def display_text(self, spec: dict, value: Any) -> str:
        """The value as one short line of plain text ("—" when absent); escaped by templates."""
        if value is None or self.is_absent(spec, value):
            return "—"
        if isinstance(value, list):
            return "; ".join(str(v) for v in value)
        return str(value)

    def export(self, spec: dict, value: Any) -> Any:
        return value

    def arrow_type(self, spec: dict | None = None) -> pa.DataType:
        """The Parquet column type of this field in releases."""
        return pa.string()

    def prompt_value(self, spec: dict) -> str:
        """What a value looks like, for the candidate prompt's output schema."""
        return "text"

    def prompt_example(self, spec: dict) -> Any:
        return "..."

    def widget_config(self, spec: dict) -> dict:
        """What the widget (``templates/fields/<widget>.html`` and its entry in
        ``static/fields/widgets.js``) needs from the spec, with the type's defaults filled in."""
        return {}


# ---------------------------------------------------------------------------------- choices

class ChoiceType(FieldType):
    name = "choice"
    widget = "radio"
    label = "Single choice"
    agreement = Agreement(CATEGORICAL, "cohen_kappa", "Cohen's κ")
    roles = frozenset({"stratum", "category", "dictionary", "counted"})
    spec_keys = ("choices",)

    def check_spec(self, spec: dict) -> None:
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices or not all(isinstance(c, str) and c.strip() for c in choices):
            raise SchemaError(f"field {spec.get('name')!r}: choices must be a non-empty list of texts")
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

    def prompt_value(self, spec: dict) -> str:
        return "one of " + ", ".join(json.dumps(c) for c in spec["choices"])

    def prompt_example(self, spec: dict) -> Any:
        return " | ".join(spec["choices"])

    def widget_config(self, spec: dict) -> dict:
        return {"choices": list(spec["choices"])}


class MultiChoiceType(FieldType):
    name = "multichoice"
    widget = "checkboxes"
    label = "Multiple choice"
    agreement = Agreement(MULTILABEL, "macro_pairwise_kappa", "macro pairwise κ")
    spec_keys = ("choices", "exclusive")

    def arrow_type(self, spec: dict | None = None) -> pa.DataType:
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

    def shape_error(self, spec: dict, value: Any) -> str | None:
        return _text_list_shape_error(value)

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

    def agreement_value(self, spec: dict, value: Any) -> Any:
        return frozenset(x for x in value if isinstance(x, str)) if isinstance(value, (list, tuple)) else frozenset()

    def display_text(self, spec: dict, value: Any) -> str:
        return ", ".join(value) if value else "—"

    def prompt_value(self, spec: dict) -> str:
        desc = "a list of one or more of " + ", ".join(json.dumps(c) for c in spec["choices"])
        if spec.get("exclusive"):
            desc += "; " + ", ".join(json.dumps(e) for e in spec["exclusive"]) + " only on its own"
        return desc

    def prompt_example(self, spec: dict) -> Any:
        return [spec["choices"][0]]

    def widget_config(self, spec: dict) -> dict:
        return {"choices": list(spec["choices"]), "exclusive": list(spec.get("exclusive", []))}


# ---------------------------------------------------------------------------------- texts

class EntityType(FieldType):
    name = "entity"
    widget = "entity"
    label = "Entity (who is targeted)"
    agreement = Agreement(CONTINUOUS, "f1_rel", "mean F1_rel", measure="F1_rel", shares=(0.7,))
    threshold_key = "entity_f1"
    roles = frozenset({"dictionary"})
    spec_keys = ("max_length",)
    max_length = 200

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        clean = _clean_string(value, max_length=spec.get("max_length", self.max_length))
        if clean is None:
            raise FieldError("is empty")
        return clean

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        # Same canonical form (paper Table 8 "Yes" pairs) scores 1.0: a minor difference, which
        # the "entity_canonical" auto-merge rule can settle without a reviewer.
        return f1_rel(a, b, lexicon)

    def auto_merge(self, spec: dict, values: list, *, rules: set[str], lexicon: dict | None) -> tuple[Any, str] | None:
        if "entity_canonical" not in rules or any(v is None for v in values):
            return None
        if len({canonicalize(v, lexicon) for v in values}) != 1:
            return None
        # The surface form most annotators wrote; ties go to the first annotator.
        best = max(values, key=lambda v: (values.count(v), -values.index(v)))
        return best, "entity_canonical"

    def pair_scores(self, spec: dict, a: Sequence[Any], b: Sequence[Any], *, lexicon: dict | None) -> np.ndarray:
        return f1_rel_batch(list(a), list(b), lexicon)

    def prompt_value(self, spec: dict) -> str:
        return "a short noun phrase naming who is targeted (e.g. \"Muslim people\")"

    def widget_config(self, spec: dict) -> dict:
        return {"max_length": spec.get("max_length", self.max_length)}


class SpanType(FieldType):
    name = "span"
    widget = "span"
    label = "Text mention (exact span of the item text)"
    agreement = Agreement(CONTINUOUS, "token_f1", "mean token-F1", measure="token-F1", shares=(0.7,))
    threshold_key = "mention_f1"
    roles = frozenset({"mention", "grounding"})
    spec_keys = ("source", "snap")
    blank_is_absent = False
    #: How the widget extends a selection: to whole words (CJK characters stay single) or not at all.
    snaps = ("word", "char")

    def check_spec(self, spec: dict) -> None:
        if spec.get("snap", "word") not in self.snaps:
            raise SchemaError(f"field {spec.get('name')!r}: snap must be one of {', '.join(self.snaps)}")

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
        return token_f1(a, b)

    def pair_scores(self, spec: dict, a: Sequence[Any], b: Sequence[Any], *, lexicon: dict | None) -> np.ndarray:
        return token_f1_batch(list(a), list(b))

    def display_text(self, spec: dict, value: Any) -> str:
        return f"“{value}”" if isinstance(value, str) and value else "—"

    def prompt_value(self, spec: dict) -> str:
        return "the exact span copied character for character from the ITEM TEXT (no paraphrase, no correction)"

    def widget_config(self, spec: dict) -> dict:
        return {"snap": spec.get("snap", "word")}


class FreeTextType(FieldType):
    name = "text"
    widget = "textarea"
    label = "Free text"
    agreement = Agreement(CONTINUOUS, "token_f1", "mean token-F1", measure="token-F1", shares=(0.7,))
    threshold_key = "text_f1"
    spec_keys = ("max_length",)
    max_length = 5000

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        clean = _clean_string(value, max_length=spec.get("max_length", self.max_length))
        if clean is None:
            raise FieldError("is empty")
        return clean

    def widget_config(self, spec: dict) -> dict:
        return {"max_length": spec.get("max_length", self.max_length)}

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        return token_f1(a, b)

    def pair_scores(self, spec: dict, a: Sequence[Any], b: Sequence[Any], *, lexicon: dict | None) -> np.ndarray:
        return token_f1_batch(list(a), list(b))


class TextListType(FieldType):
    name = "textlist"
    widget = "textlist"
    label = "List of texts"
    agreement = Agreement(CONTINUOUS, "token_f1", "mean token-F1", measure="token-F1", shares=(0.7,))
    threshold_key = "text_f1"
    spec_keys = ("max_items", "max_length")
    max_items = 50
    max_length = 2000

    def arrow_type(self, spec: dict | None = None) -> pa.DataType:
        return pa.list_(pa.string())

    def absent(self, spec: dict) -> Any:
        return []

    def is_absent(self, spec: dict, value: Any) -> bool:
        return value is None or value == []

    def shape_error(self, spec: dict, value: Any) -> str | None:
        return _text_list_shape_error(value)

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
        return token_f1(" ".join(a), " ".join(b))

    def agreement_value(self, spec: dict, value: Any) -> Any:
        # Compared as one text, like similarity().
        return " ".join(x for x in value if isinstance(x, str)) if isinstance(value, (list, tuple)) else None

    def pair_scores(self, spec: dict, a: Sequence[Any], b: Sequence[Any], *, lexicon: dict | None) -> np.ndarray:
        return token_f1_batch(list(a), list(b))

    def prompt_value(self, spec: dict) -> str:
        return "a list of short texts"

    def widget_config(self, spec: dict) -> dict:
        return {"max_items": spec.get("max_items", self.max_items)}

    def prompt_example(self, spec: dict) -> Any:
        return ["..."]


# ---------------------------------------------------------------------------------- boxes

class BoxesType(FieldType):
    name = "boxes"
    widget = "boxes"
    label = "Boxes on the image"
    agreement = Agreement(CONTINUOUS, "enclosing_iou", "share IoU ≥ 0.75", measure="IoU", shares=(0.75, 0.5),
                          primary="share_0.75")
    threshold_key = "region_iou"
    roles = frozenset({"region", "grounding"})
    spec_keys = ("max_boxes",)
    scale = 1000
    max_boxes = 50

    def arrow_type(self, spec: dict | None = None) -> pa.DataType:
        return pa.list_(pa.list_(pa.int32()))

    def absent(self, spec: dict) -> Any:
        return []

    def is_absent(self, spec: dict, value: Any) -> bool:
        return value is None or value == []

    def shape_error(self, spec: dict, value: Any) -> str | None:
        if not isinstance(value, list) or len(value) > MAX_DRAFT_LIST:
            return "must be a list of boxes"
        for box in value:
            if not (
                isinstance(box, list) and len(box) == 4
                and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in box)
            ):
                return "each box must be [x1, y1, x2, y2]"
        return None

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
        return enclosing_iou(a, b)

    def auto_merge(self, spec: dict, values: list, *, rules: set[str], lexicon: dict | None) -> tuple[Any, str] | None:
        """``boxes_mean``: same number of boxes, matched one-to-one by IoU (Hungarian), averaged."""
        if "boxes_mean" not in rules or not values or any(not v for v in values):
            return None
        if len({len(v) for v in values}) != 1:
            return None
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

    def agreement_value(self, spec: dict, value: Any) -> Any:
        return [b for b in value if isinstance(b, (list, tuple)) and len(b) == 4] if isinstance(value, list) else []

    def pair_scores(self, spec: dict, a: Sequence[Any], b: Sequence[Any], *, lexicon: dict | None) -> np.ndarray:
        return enclosing_iou_batch(list(a), list(b))

    def display_text(self, spec: dict, value: Any) -> str:
        if not value:
            return "no box"
        n = len(value)
        return f"{n} box{'es' if n != 1 else ''}: " + "; ".join("[" + ", ".join(str(c) for c in b) + "]" for b in value)

    def prompt_value(self, spec: dict) -> str:
        return ("a list of boxes [x1, y1, x2, y2], integers normalized to [0, 1000] of the image width and height, "
                "(x1, y1) top-left and (x2, y2) bottom-right, x1 < x2 and y1 < y2, one box per visual instance")

    def prompt_example(self, spec: dict) -> Any:
        return [["x1", "y1", "x2", "y2"]]

    def widget_config(self, spec: dict) -> dict:
        return {"max_boxes": spec.get("max_boxes", self.max_boxes)}


# ---------------------------------------------------------------------------------- structured lists

_ITEM_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,19}$")


def _object_list(value: Any, *, what: str) -> list[dict]:
    if not isinstance(value, list):
        raise FieldError(f"must be a list of {what}")
    if not all(isinstance(v, dict) for v in value):
        raise FieldError(f"each entry must be an object ({what})")
    return value


def _dict_list_shape_error(value: Any, *, keys: Sequence[str]) -> str | None:
    if not isinstance(value, list) or len(value) > MAX_DRAFT_LIST:
        return "must be a list of entries"
    for entry in value:
        if not isinstance(entry, dict) or set(entry) - set(keys):
            return f"each entry must be an object with {', '.join(keys)}"
        for v in entry.values():
            if v is not None and _text_shape_error(v):
                return "entries hold texts"
    return None


class ChecklistType(FieldType):
    """A list of 1..N short binary requirements ``{id, text[, link]}`` (MemeBench VIKR: one
    field per layer, 1-4 items each; Identity items link to the Visual item they identify)."""

    name = "checklist"
    widget = "checklist"
    label = "Checklist of requirements"
    agreement = Agreement(CONTINUOUS, "checklist_f1", "mean item token-F1", measure="item token-F1", shares=(0.7,))
    threshold_key = "text_f1"
    spec_keys = ("min_items", "max_items", "max_length", "link_to", "link_required", "id_prefix")
    max_items = 4
    max_length = 500

    def check_spec(self, spec: dict) -> None:
        lo, hi = spec.get("min_items", 1), spec.get("max_items", self.max_items)
        if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi <= MAX_DRAFT_LIST):
            raise SchemaError(f"field {spec.get('name')!r}: min_items and max_items must be whole numbers, "
                              f"0 <= min_items <= max_items <= {MAX_DRAFT_LIST}")
        link = spec.get("link_to")
        if link is not None and (not isinstance(link, str) or link == spec.get("name")):
            raise SchemaError(f"field {spec.get('name')!r}: link_to must name another checklist field")
        prefix = spec.get("id_prefix", "")
        if not isinstance(prefix, str) or len(prefix) > 5:
            raise SchemaError(f"field {spec.get('name')!r}: id_prefix is a short text (at most 5 characters)")

    def absent(self, spec: dict) -> Any:
        return []

    def is_absent(self, spec: dict, value: Any) -> bool:
        return value is None or value == []

    def shape_error(self, spec: dict, value: Any) -> str | None:
        return _dict_list_shape_error(value, keys=("id", "text", "link"))

    def _clean(self, spec: dict, value: Any, *, lenient: bool) -> tuple[list[dict], list[str]]:
        items = _object_list(value, what="requirements {id, text}")
        limit = spec.get("max_items", self.max_items)
        notes: list[str] = []
        if len(items) > limit:
            if not lenient:
                raise FieldError(f"at most {limit} items")
            notes.append(f"kept the first {limit} of {len(items)} items")
            items = items[:limit]
        out, seen = [], set()
        prefix = spec.get("id_prefix", "")
        for i, entry in enumerate(items, start=1):
            text = _clean_string(entry.get("text"), max_length=spec.get("max_length", self.max_length)) \
                if isinstance(entry.get("text"), (str, type(None))) else None
            if text is None:
                if lenient:
                    notes.append(f"item {i}: no text, dropped")
                    continue
                raise FieldError(f"item {i} needs a text")
            ident = entry.get("id")
            if ident is None or ident == "":
                if not lenient:
                    raise FieldError(f"item {i} needs an id")
                ident = f"{prefix}{i}"
            ident = str(ident).strip()
            if not _ITEM_ID.match(ident):
                raise FieldError(f"item {i}: id {ident[:30]!r} must be 1-20 letters, digits, '_', '-' or '.'")
            if ident in seen:
                raise FieldError(f"item id {ident!r} appears twice")
            seen.add(ident)
            link = entry.get("link")
            if link not in (None, ""):
                if spec.get("link_to") is None:
                    raise FieldError(f"item {ident}: this field has no linked field")
                link = str(link).strip()
            else:
                link = None
            out.append({"id": ident, "text": text, "link": link})
        if len(out) < spec.get("min_items", 1):
            raise FieldError(f"needs at least {spec.get('min_items', 1)} item(s)")
        return out, notes

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        return self._clean(spec, value, lenient=False)[0]

    def normalize_candidate(self, spec: dict, value: Any, ctx: Context) -> tuple[Any, list[str]]:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = [{"text": v} for v in value]  # a bare list of texts: ids are assigned
        return self._clean(spec, value, lenient=True)

    def validate_record(self, spec: dict, value: Any, record: dict) -> str | None:
        target = spec.get("link_to")
        if not target or not value:
            return None
        ids = {e.get("id") for e in record.get(target) or [] if isinstance(e, dict)}
        for entry in value:
            link = entry.get("link")
            if link is None:
                if spec.get("link_required"):
                    return f"item {entry['id']} must name the {target} item it refers to"
            elif link not in ids:
                return f"item {entry['id']} links to {link!r}, which is not an item of {target}"
        return None

    def canonical(self, spec: dict, value: Any) -> Any:
        return tuple(sorted((normalize(e["text"]), e.get("link") or "") for e in value or []))

    def _matrix(self, a: list[dict], b: list[dict]) -> np.ndarray:
        return np.array([[token_f1(x.get("text"), y.get("text")) for y in b] for x in a], dtype=float).reshape(
            len(a), len(b))

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        """One-to-one best match of the items by token-F1, averaged over the longer list."""
        return _best_match(self._matrix(a or [], b or []))

    def agreement_value(self, spec: dict, value: Any) -> Any:
        return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []

    def pair_scores(self, spec: dict, a: Sequence[Any], b: Sequence[Any], *, lexicon: dict | None) -> np.ndarray:
        return np.fromiter((_best_match(self._matrix(x, y)) for x, y in zip(a, b)), dtype=np.float64, count=len(a))

    def display_text(self, spec: dict, value: Any) -> str:
        if not value:
            return "—"
        return "; ".join(f"{e['id']}: {e['text']}" + (f" (→ {e['link']})" if e.get("link") else "") for e in value)

    def arrow_type(self, spec: dict | None = None) -> pa.DataType:
        return pa.list_(pa.struct([("id", pa.string()), ("text", pa.string()), ("link", pa.string())]))

    def prompt_value(self, spec: dict) -> str:
        lo, hi = spec.get("min_items", 1), spec.get("max_items", self.max_items)
        desc = (f"a list of {lo} to {hi} short binary requirements, each an object "
                f"{{\"id\": \"{spec.get('id_prefix', '')}1\", \"text\": \"...\"}} with a unique id")
        if spec.get("link_to"):
            desc += (f" and \"link\": the id of the {spec['link_to']} item it refers to"
                     + ("" if spec.get("link_required") else " (or null)"))
        return desc

    def prompt_example(self, spec: dict) -> Any:
        entry = {"id": f"{spec.get('id_prefix', '')}1", "text": "..."}
        if spec.get("link_to"):
            entry["link"] = "..."
        return [entry]

    def widget_config(self, spec: dict) -> dict:
        return {"id_prefix": spec.get("id_prefix", ""), "link_to": spec.get("link_to"),
                "link_required": bool(spec.get("link_required")), "min_items": spec.get("min_items", 1),
                "max_items": spec.get("max_items", self.max_items)}


class PairListType(FieldType):
    """A list of structured pairs with named parts (MemeCap's visual metaphors
    ``{vehicle, meaning}``); ``parts`` names the parts, each a short text."""

    name = "pairlist"
    widget = "pairlist"
    label = "List of pairs (e.g. vehicle → meaning)"
    agreement = Agreement(CONTINUOUS, "pair_f1", "mean pair token-F1", measure="pair token-F1", shares=(0.7,))
    threshold_key = "text_f1"
    spec_keys = ("parts", "min_items", "max_items", "max_length")
    max_items = 20
    max_length = 500
    default_parts = ("vehicle", "meaning")

    def parts(self, spec: dict) -> list[str]:
        return list(spec.get("parts") or self.default_parts)

    def check_spec(self, spec: dict) -> None:
        parts = spec.get("parts", list(self.default_parts))
        if (not isinstance(parts, list) or not 2 <= len(parts) <= 4 or len(set(parts)) != len(parts)
                or not all(isinstance(p, str) and re.match(r"^[a-z][a-z0-9_]{0,30}$", p) for p in parts)):
            raise SchemaError(f"field {spec.get('name')!r}: parts must be 2-4 distinct lower-case names")
        lo, hi = spec.get("min_items", 0), spec.get("max_items", self.max_items)
        if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi <= MAX_DRAFT_LIST):
            raise SchemaError(f"field {spec.get('name')!r}: 0 <= min_items <= max_items <= {MAX_DRAFT_LIST}")

    def absent(self, spec: dict) -> Any:
        return []

    def is_absent(self, spec: dict, value: Any) -> bool:
        return value is None or value == []

    def shape_error(self, spec: dict, value: Any) -> str | None:
        return _dict_list_shape_error(value, keys=self.parts(spec))

    def _clean(self, spec: dict, value: Any, *, lenient: bool) -> tuple[list[dict], list[str]]:
        parts = self.parts(spec)
        entries = _object_list(value, what="pairs " + "{" + ", ".join(parts) + "}")
        limit = spec.get("max_items", self.max_items)
        notes: list[str] = []
        if len(entries) > limit:
            if not lenient:
                raise FieldError(f"at most {limit} pairs")
            notes.append(f"kept the first {limit} of {len(entries)} pairs")
            entries = entries[:limit]
        out = []
        for i, entry in enumerate(entries, start=1):
            unknown = set(entry) - set(parts)
            if unknown and not lenient:
                raise FieldError(f"pair {i}: unknown part(s) {', '.join(sorted(map(str, unknown)))}")
            clean = {}
            for part in parts:
                raw = entry.get(part)
                text = _clean_string(raw, max_length=spec.get("max_length", self.max_length)) \
                    if isinstance(raw, (str, type(None))) else None
                if text is None:
                    break
                clean[part] = text
            if len(clean) < len(parts):
                if all(not isinstance(entry.get(p), str) or not entry.get(p).strip() for p in parts):
                    continue  # an empty row the widget left behind
                missing = [p for p in parts if p not in clean]
                if lenient:
                    notes.append(f"pair {i}: no {', '.join(missing)}, dropped")
                    continue
                raise FieldError(f"pair {i} needs its {' and '.join(missing)}")
            out.append(clean)
        if len(out) < spec.get("min_items", 0):
            raise FieldError(f"needs at least {spec.get('min_items', 0)} pair(s)")
        return out, notes

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        return self._clean(spec, value, lenient=False)[0]

    def normalize_candidate(self, spec: dict, value: Any, ctx: Context) -> tuple[Any, list[str]]:
        parts = self.parts(spec)
        if isinstance(value, list):
            converted = []
            for v in value:
                # "vehicle -> meaning" strings or [vehicle, meaning] lists, as models often answer
                if isinstance(v, str) and "->" in v and len(parts) == 2:
                    left, right = v.split("->", 1)
                    v = {parts[0]: left, parts[1]: right}
                elif isinstance(v, (list, tuple)) and len(v) == len(parts):
                    v = dict(zip(parts, v))
                converted.append(v)
            value = converted
        return self._clean(spec, value, lenient=True)

    def canonical(self, spec: dict, value: Any) -> Any:
        parts = self.parts(spec)
        return tuple(sorted(tuple(normalize(e.get(p)) for p in parts) for e in value or []))

    def _matrix(self, spec: dict, a: list[dict], b: list[dict]) -> np.ndarray:
        parts = self.parts(spec)
        return np.array([[sum(token_f1(x.get(p), y.get(p)) for p in parts) / len(parts) for y in b] for x in a],
                        dtype=float).reshape(len(a), len(b))

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        """One-to-one best match of the pairs (mean token-F1 over the parts), over the longer list."""
        return _best_match(self._matrix(spec, a or [], b or []))

    def agreement_value(self, spec: dict, value: Any) -> Any:
        return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []

    def pair_scores(self, spec: dict, a: Sequence[Any], b: Sequence[Any], *, lexicon: dict | None) -> np.ndarray:
        return np.fromiter((_best_match(self._matrix(spec, x, y)) for x, y in zip(a, b)), dtype=np.float64,
                           count=len(a))

    def display_text(self, spec: dict, value: Any) -> str:
        if not value:
            return "—"
        parts = self.parts(spec)
        return "; ".join(" → ".join(str(e.get(p, "")) for p in parts) for e in value)

    def arrow_type(self, spec: dict | None = None) -> pa.DataType:
        parts = self.parts(spec or {})
        return pa.list_(pa.struct([(p, pa.string()) for p in parts]))

    def prompt_value(self, spec: dict) -> str:
        parts = self.parts(spec)
        return ("a list of objects {" + ", ".join(f"\"{p}\": \"...\"" for p in parts) + "}"
                + (" (e.g. the element in the image and what it stands for)" if parts == list(self.default_parts)
                   else ""))

    def prompt_example(self, spec: dict) -> Any:
        return [dict.fromkeys(self.parts(spec), "...")]

    def widget_config(self, spec: dict) -> dict:
        return {"parts": self.parts(spec), "max_items": spec.get("max_items", self.max_items)}


REGISTRY: dict[str, FieldType] = {
    t.name: t
    for t in (ChoiceType(), MultiChoiceType(), EntityType(), SpanType(), BoxesType(), FreeTextType(), TextListType(),
              ChecklistType(), PairListType())
}
