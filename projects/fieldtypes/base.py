"""The field-type base class and what every type shares (see projects.fieldtypes)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from scipy.optimize import linear_sum_assignment

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

    def agreement_extra(self, spec: dict, rows: list[list[Any]], mask) -> list[tuple[str, str, Any]]:
        """Figures beyond the type's Agreement spec, as ``(key, label, Contributions)`` over the
        report's items (``rows[i]`` = the records' agreement values of item i; items outside
        ``mask`` contribute nothing): free text adds BLEU-4 and ROUGE-L (MemeCap)."""
        return []

    def widget_config(self, spec: dict) -> dict:
        """What the widget (``templates/fields/<widget>.html`` and its entry in
        ``static/fields/widgets.js``) needs from the spec, with the type's defaults filled in."""
        return {}

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

    # ------------------------------------------------------------------ evaluation

    #: How metrics.evaluation scores a prediction of this type (its figures: accuracy and F1s
    #: for choices, F1_rel for entities, EM/token-F1 for spans, IoU shares for boxes, BLEU-4 /
    #: ROUGE-L / token-F1 for free text); None: the type has no automatic evaluation metric.
    evaluation_kind: ClassVar[str | None] = None

    def evaluation(self, spec: dict, *, references: bool = False) -> dict | None:
        """This field's entry of a release's evaluation plan (metrics.evaluation), or None.

        The field is scored over the items where its gold ``visible_if`` holds (Meme3W: target
        fields over gold-harmful items); ``references``: gold holds a list of kept references
        (MemeCap's captions), scored against all of them."""
        if self.evaluation_kind is None:
            return None
        entry = {
            "name": spec["name"],
            "kind": self.evaluation_kind,
            "label": spec.get("label") or spec["name"],
            "subset": spec.get("visible_if"),
            "references": bool(references),
        }
        entry.update(self.evaluation_options(spec))
        return entry

    def evaluation_options(self, spec: dict) -> dict:
        """What the scorer needs from the spec besides the kind (choices, parts)."""
        return {}

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
