"""Multiple choice (checkboxes) with exclusive options."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from projects.fieldtypes.base import (
    MULTILABEL,
    Agreement,
    Context,
    FieldError,
    FieldType,
    SchemaError,
    _text_list_shape_error,
)
from projects.fieldtypes.choice import ChoiceType


class MultiChoiceType(FieldType):
    name = "multichoice"
    widget = "checkboxes"
    label = "Multiple choice"
    agreement = Agreement(MULTILABEL, "macro_pairwise_kappa", "macro pairwise κ")
    spec_keys = ("choices", "exclusive")
    evaluation_kind = "multichoice"

    def evaluation_options(self, spec: dict) -> dict:
        return {"choices": list(spec["choices"])}

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
