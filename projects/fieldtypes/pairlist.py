"""A list of structured pairs with named parts (MemeCap visual metaphors {vehicle, meaning})."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from metrics.text import normalize, token_f1
from projects.fieldtypes.base import (
    CONTINUOUS,
    MAX_DRAFT_LIST,
    Agreement,
    Context,
    FieldError,
    FieldType,
    SchemaError,
    _best_match,
    _clean_string,
    _dict_list_shape_error,
    _object_list,
)


class PairListType(FieldType):
    """A list of structured pairs with named parts (MemeCap's visual metaphors
    ``{vehicle, meaning}``); ``parts`` names the parts, each a short text."""

    name = "pairlist"
    widget = "pairlist"
    label = "List of pairs (e.g. vehicle → meaning)"
    agreement = Agreement(CONTINUOUS, "pair_f1", "mean pair token-F1", measure="pair token-F1", shares=(0.7,))
    threshold_key = "text_f1"
    spec_keys = ("parts", "min_items", "max_items", "max_length")
    evaluation_kind = "pairlist"

    def evaluation_options(self, spec: dict) -> dict:
        return {"parts": self.parts(spec)}

    max_items = 20
    max_length = 500
    default_parts = ("vehicle", "meaning")

    def parts(self, spec: dict) -> list[str]:
        return list(spec.get("parts") or self.default_parts)

    def check_spec(self, spec: dict) -> None:
        parts = spec.get("parts", list(self.default_parts))
        if (
            not isinstance(parts, list)
            or not 2 <= len(parts) <= 4
            or len(set(parts)) != len(parts)
            or not all(isinstance(p, str) and re.match(r"^[a-z][a-z0-9_]{0,30}$", p) for p in parts)
        ):
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
                text = (
                    _clean_string(raw, max_length=spec.get("max_length", self.max_length))
                    if isinstance(raw, (str, type(None)))
                    else None
                )
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
        return np.array(
            [[sum(token_f1(x.get(p), y.get(p)) for p in parts) / len(parts) for y in b] for x in a], dtype=float
        ).reshape(len(a), len(b))

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        """One-to-one best match of the pairs (mean token-F1 over the parts), over the longer list."""
        return _best_match(self._matrix(spec, a or [], b or []))

    def agreement_value(self, spec: dict, value: Any) -> Any:
        return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []

    def pair_scores(self, spec: dict, a: Sequence[Any], b: Sequence[Any], *, lexicon: dict | None) -> np.ndarray:
        return np.fromiter(
            (_best_match(self._matrix(spec, x, y)) for x, y in zip(a, b)), dtype=np.float64, count=len(a)
        )

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
        return (
            "a list of objects {"
            + ", ".join(f'"{p}": "..."' for p in parts)
            + "}"
            + (" (e.g. the element in the image and what it stands for)" if parts == list(self.default_parts) else "")
        )

    def prompt_example(self, spec: dict) -> Any:
        return [dict.fromkeys(self.parts(spec), "...")]

    def widget_config(self, spec: dict) -> dict:
        return {"parts": self.parts(spec), "max_items": spec.get("max_items", self.max_items)}
