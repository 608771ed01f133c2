"""Free text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from metrics.text import token_f1, token_f1_batch
from projects.fieldtypes.base import CONTINUOUS, Agreement, Context, FieldError, FieldType, _clean_string


class FreeTextType(FieldType):
    name = "text"
    widget = "textarea"
    label = "Free text"
    agreement = Agreement(CONTINUOUS, "token_f1", "mean token-F1", measure="token-F1", shares=(0.7,))
    threshold_key = "text_f1"
    spec_keys = ("max_length",)
    evaluation_kind = "text"
    max_length = 5000

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        clean = _clean_string(value, max_length=spec.get("max_length", self.max_length))
        if clean is None:
            raise FieldError("is empty")
        return clean

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        return token_f1(a, b)

    def pair_scores(self, spec: dict, a: Sequence[Any], b: Sequence[Any], *, lexicon: dict | None) -> np.ndarray:
        return token_f1_batch(list(a), list(b))

    def widget_config(self, spec: dict) -> dict:
        return {"max_length": spec.get("max_length", self.max_length)}
