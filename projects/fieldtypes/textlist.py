"""A list of short texts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from metrics.text import token_f1, token_f1_batch
from projects.fieldtypes.base import (
    CONTINUOUS,
    Agreement,
    Context,
    FieldError,
    FieldType,
    _clean_string,
    _text_list_shape_error,
)


class TextListType(FieldType):
    name = "textlist"
    widget = "textlist"
    label = "List of texts"
    agreement = Agreement(CONTINUOUS, "token_f1", "mean token-F1", measure="token-F1", shares=(0.7,))
    threshold_key = "text_f1"
    spec_keys = ("max_items", "max_length")
    evaluation_kind = "textlist"
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

    def prompt_example(self, spec: dict) -> Any:
        return ["..."]

    def widget_config(self, spec: dict) -> dict:
        return {"max_items": spec.get("max_items", self.max_items)}
