"""Single choice (radio)."""

from __future__ import annotations

import json
from typing import Any

from projects.fieldtypes.base import CATEGORICAL, Agreement, Context, FieldError, FieldType, SchemaError

# ---------------------------------------------------------------------------------- choices


class ChoiceType(FieldType):
    name = "choice"
    widget = "radio"
    label = "Single choice"
    agreement = Agreement(CATEGORICAL, "cohen_kappa", "Cohen's κ")
    roles = frozenset({"stratum", "category", "dictionary", "counted"})
    spec_keys = ("choices",)
    evaluation_kind = "choice"

    def evaluation_options(self, spec: dict) -> dict:
        return {"choices": list(spec["choices"])}

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
