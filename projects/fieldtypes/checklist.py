"""Checklist: 1..N short binary requirements {id, text[, link]} (MemeBench VIKR)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from metrics.text import normalize, token_f1
from projects.fieldtypes.base import (
    _ITEM_ID,
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


class ChecklistType(FieldType):
    """A list of 1..N short binary requirements ``{id, text[, link]}`` (MemeBench VIKR: one
    field per layer, 1-4 items each; Identity items link to the Visual item they identify)."""

    name = "checklist"
    widget = "checklist"
    label = "Checklist of requirements"
    agreement = Agreement(CONTINUOUS, "checklist_f1", "mean item token-F1", measure="item token-F1", shares=(0.7,))
    threshold_key = "text_f1"
    spec_keys = ("min_items", "max_items", "max_length", "link_to", "link_required", "id_prefix")
    #: MemeBench scores a model's explanation against the checklists with two LLM judges
    #: (Success = both pass it); a prediction is not a checklist, so there is no direct metric.
    evaluation_kind = None
    max_items = 4
    max_length = 500

    def check_spec(self, spec: dict) -> None:
        lo, hi = spec.get("min_items", 1), spec.get("max_items", self.max_items)
        if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi <= MAX_DRAFT_LIST):
            raise SchemaError(
                f"field {spec.get('name')!r}: min_items and max_items must be whole numbers, "
                f"0 <= min_items <= max_items <= {MAX_DRAFT_LIST}"
            )
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
            text = (
                _clean_string(entry.get("text"), max_length=spec.get("max_length", self.max_length))
                if isinstance(entry.get("text"), (str, type(None)))
                else None
            )
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
            len(a), len(b)
        )

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
        desc = (
            f"a list of {lo} to {hi} short binary requirements, each an object "
            f'{{"id": "{spec.get("id_prefix", "")}1", "text": "..."}} with a unique id'
        )
        if spec.get("link_to"):
            desc += f' and "link": the id of the {spec["link_to"]} item it refers to' + (
                "" if spec.get("link_required") else " (or null)"
            )
        return desc

    def prompt_example(self, spec: dict) -> Any:
        entry = {"id": f"{spec.get('id_prefix', '')}1", "text": "..."}
        if spec.get("link_to"):
            entry["link"] = "..."
        return [entry]

    def widget_config(self, spec: dict) -> dict:
        return {
            "id_prefix": spec.get("id_prefix", ""),
            "link_to": spec.get("link_to"),
            "link_required": bool(spec.get("link_required")),
            "min_items": spec.get("min_items", 1),
            "max_items": spec.get("max_items", self.max_items),
        }
