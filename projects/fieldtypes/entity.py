"""Entity: who is targeted (F1_rel with the project lexicon)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from metrics.entity import canonicalize, f1_rel, f1_rel_batch
from projects.fieldtypes.base import CONTINUOUS, Agreement, Context, FieldError, FieldType, _clean_string

# ---------------------------------------------------------------------------------- texts


class EntityType(FieldType):
    name = "entity"
    widget = "entity"
    label = "Entity (who is targeted)"
    agreement = Agreement(CONTINUOUS, "f1_rel", "mean F1_rel", measure="F1_rel", shares=(0.7,))
    threshold_key = "entity_f1"
    roles = frozenset({"dictionary"})
    spec_keys = ("max_length",)
    evaluation_kind = "entity"
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
        return 'a short noun phrase naming who is targeted (e.g. "Muslim people")'

    def widget_config(self, spec: dict) -> dict:
        return {"max_length": spec.get("max_length", self.max_length)}
