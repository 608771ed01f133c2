"""Free text."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from metrics.captions import caption_agreement_contributions
from metrics.text import token_f1, token_f1_batch
from projects.fieldtypes.base import CONTINUOUS, Agreement, Context, FieldError, FieldType, _clean_string

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


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

    def agreement_extra(self, spec: dict, rows: list[list[Any]], mask) -> list[tuple[str, str, Any]]:
        """Caption agreement between annotators (MemeCap section 5.1's metrics): each record
        scored against the others' as references; Chinese text tokenized per character."""
        items = [{slot: [v] for slot, v in enumerate(row) if isinstance(v, str) and v.strip()} for row in rows]
        cjk = any(_CJK.search(v[0]) for it in items for v in it.values())
        tokenize, tokenizer = ("zh", "concord") if cjk else ("13a", "default")
        return [
            (
                "bleu",
                "BLEU-4 between annotators (corpus, sacrebleu)",
                caption_agreement_contributions(items, "bleu", subset=mask, tokenize=tokenize),
            ),
            (
                "rouge_l",
                "mean ROUGE-L between annotators (rouge-score)",
                caption_agreement_contributions(items, "rouge_l", subset=mask, tokenizer=tokenizer),
            ),
        ]
