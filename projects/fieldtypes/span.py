"""Text mention: an exact span of the item text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from metrics.text import token_f1, token_f1_batch
from projects.fieldtypes.base import CONTINUOUS, Agreement, Context, FieldError, FieldType, SchemaError


class SpanType(FieldType):
    name = "span"
    widget = "span"
    label = "Text mention (exact span of the item text)"
    agreement = Agreement(CONTINUOUS, "token_f1", "mean token-F1", measure="token-F1", shares=(0.7,))
    threshold_key = "mention_f1"
    roles = frozenset({"mention", "grounding"})
    spec_keys = ("source", "snap")
    evaluation_kind = "span"
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
