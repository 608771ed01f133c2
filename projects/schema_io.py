"""Schemas as files and as a form: parse uploaded JSON / YAML (hostile until proven otherwise),
dump them, turn the schema editor's form fields into a schema, and list every problem of a
schema by field and rule (the registry checks one field at a time, so a person sees all of
them at once instead of the first).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from core.errors import Invalid
from core.parsers import MAX_JSON_DEPTH, depth_within
from projects.fieldtypes import COMMON_SPEC_KEYS, REGISTRY, SchemaError
from projects.schema import Schema

MAX_SCHEMA_BYTES = 200_000
MAX_FIELDS = 60
MAX_CHOICES = 200
MAX_TEXT = {"label": 200, "help": 2000}
FORMATS = ("json", "yaml")
#: Keys of a spec the editor form has inputs for; any other key of the type is kept in "extra".
FORM_KEYS = ("name", "type", "label", "help", "required", "choices", "exclusive", "visible_if", "threshold")


def field_where(index: int, spec: Any) -> str:
    name = spec.get("name") if isinstance(spec, dict) else None
    return f"field {index + 1}" + (f" ({name})" if isinstance(name, str) and name else "")


def schema_problems(data: Any) -> dict[str, str]:
    """Every problem of ``data`` as a schema: ``{"field 2 (target)": "rule ..."}``; empty when usable."""
    if not isinstance(data, dict):
        return {"schema": "a schema is an object with a list of fields"}
    unknown_top = sorted(set(data) - {"version", "fields"})
    problems: dict[str, str] = {}
    if unknown_top:
        problems["schema"] = f"unknown key(s) {', '.join(map(str, unknown_top))} (a schema has version and fields)"
    fields = data.get("fields")
    if not isinstance(fields, list) or not fields:
        problems["schema"] = "the list of fields is empty: add at least one field"
        return problems
    if len(fields) > MAX_FIELDS:
        problems["schema"] = f"at most {MAX_FIELDS} fields"
        return problems
    accepted: list[dict] = []
    for index, spec in enumerate(fields):
        where = field_where(index, spec)
        if not isinstance(spec, dict):
            problems[where] = "must be an object with name and type"
            continue
        ftype = REGISTRY.get(spec.get("type"))
        if ftype is not None:
            unknown = sorted(set(spec) - set(COMMON_SPEC_KEYS) - set(ftype.spec_keys))
            if unknown:
                problems[where] = f"unknown key(s) for a {spec['type']} field: {', '.join(map(str, unknown))}"
                continue
        for key, limit in MAX_TEXT.items():
            if key in spec and (not isinstance(spec[key], str) or len(spec[key]) > limit):
                problems[where] = f"{key} must be text of at most {limit} characters"
                break
        else:
            if isinstance(spec.get("choices"), list) and len(spec["choices"]) > MAX_CHOICES:
                problems[where] = f"at most {MAX_CHOICES} choices"
            elif "required" in spec and not isinstance(spec["required"], bool):
                problems[where] = "required must be true or false"
            else:
                try:
                    Schema({"fields": [*accepted, spec]})
                except SchemaError as exc:
                    problems[where] = _without_prefix(str(exc), spec)
                else:
                    problem = _condition_problem(spec, accepted)
                    if problem:
                        problems[where] = problem
                    accepted.append(spec)
                    continue
    return problems


def _condition_problem(spec: dict, earlier: list[dict]) -> str | None:
    cond = spec.get("visible_if")
    if not cond:
        return None
    parent = next(f for f in earlier if f["name"] == cond["field"])
    if parent["type"] != "choice":
        return f"visible_if must name a single-choice field ({cond['field']} is {parent['type']})"
    if not cond["in"]:
        return f"visible_if lists no value of {cond['field']}: the field would never be shown"
    unknown = [v for v in cond["in"] if v not in parent["choices"]]
    if unknown:
        return f"visible_if: {', '.join(map(str, unknown))} is not a choice of {cond['field']}"
    return None


def _without_prefix(message: str, spec: dict) -> str:
    prefix = f"field {spec.get('name')!r}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def schema_check(data: Any) -> dict:
    """The schema, or Invalid listing every problem by field and rule."""
    problems = schema_problems(data)
    if problems:
        raise Invalid(
            f"The schema has {len(problems)} problem{'s' if len(problems) > 1 else ''}: fix them and save again.",
            errors=problems,
        )
    return {"version": data.get("version", 1), "fields": data["fields"]}


# ------------------------------------------------------------------ files


class _NoAliasLoader(yaml.SafeLoader):
    """Safe YAML without anchors and aliases: an alias bomb ("billion laughs") cannot expand."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"line {event.start_mark.line + 1}: anchors and aliases (*name) are not accepted")
        return super().compose_node(parent, index)


def schema_parse(text: str | bytes, *, fmt: str) -> Any:
    """The object in an uploaded schema file (JSON or YAML); Invalid with the line when it cannot be read."""
    if fmt not in FORMATS:
        raise Invalid("Choose JSON or YAML.", errors={"format": f"one of {', '.join(FORMATS)}"})
    if isinstance(text, bytes):
        if len(text) > MAX_SCHEMA_BYTES:
            raise Invalid(f"The file is larger than {MAX_SCHEMA_BYTES:,} bytes.", errors={"file": "too large"})
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise Invalid("The file is not UTF-8 text.", errors={"file": "not UTF-8 text"}) from None
    if len(text) > MAX_SCHEMA_BYTES:
        raise Invalid(f"The schema is longer than {MAX_SCHEMA_BYTES:,} characters.", errors={"file": "too large"})
    if "\x00" in text:
        raise Invalid("The file contains a NUL character.", errors={"file": "binary content"})
    try:
        if fmt == "json":
            data = json.loads(text)
        else:
            data = yaml.load(text, Loader=_NoAliasLoader)
    except RecursionError:
        raise Invalid(
            f"The schema is nested deeper than {MAX_JSON_DEPTH} levels.", errors={"file": "too deep"}
        ) from None
    except json.JSONDecodeError as exc:
        raise Invalid(
            f"Not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}.", errors={"file": "not JSON"}
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise Invalid(f"Not valid YAML: {where}{problem}.", errors={"file": "not YAML"}) from None
    if not depth_within(data, MAX_JSON_DEPTH):
        raise Invalid(f"The schema is nested deeper than {MAX_JSON_DEPTH} levels.", errors={"file": "too deep"})
    if isinstance(data, list):  # a bare list of fields is accepted too
        data = {"fields": data}
    return data


def schema_dump(schema: dict, *, fmt: str) -> str:
    if fmt == "yaml":
        return yaml.safe_dump(schema, sort_keys=False, allow_unicode=True, width=100)
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


# ------------------------------------------------------------------ the editor form


def _lines(text: str) -> list[str]:
    return [line.strip() for line in (text or "").replace(",", "\n").splitlines() if line.strip()]


def _choice_lines(text: str) -> list[str]:
    # Choices may contain commas ("religion, caste"): one per line.
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def schema_from_form(post, *, count: int) -> tuple[dict, dict[str, str]]:
    """The schema the editor form describes (``f-<i>-<key>`` inputs, in order) and the problems
    of inputs that are not even the right kind (a threshold that is not a number, extra
    settings that are not JSON). The inputs are kept as typed: nothing a person wrote is lost
    when the schema is refused."""
    fields, problems = [], {}
    for i in range(count):
        p = f"f-{i}-"
        if post.get(p + "deleted"):
            continue
        spec: dict[str, Any] = {"name": post.get(p + "name", "").strip(), "type": post.get(p + "type", "")}
        where = field_where(len(fields), spec)
        extra_text = post.get(p + "extra", "").strip()
        if extra_text:
            try:
                extra = json.loads(extra_text)
                if not isinstance(extra, dict):
                    raise ValueError
            except ValueError:
                problems[where] = 'other settings must be a JSON object, e.g. {"max_boxes": 5}'
                extra = {}
            spec.update({k: v for k, v in extra.items() if k not in FORM_KEYS})
        for key in ("label", "help"):
            value = post.get(p + key, "").strip()
            if value:
                spec[key] = value
        if post.get(p + "required"):
            spec["required"] = True
        ftype = REGISTRY.get(spec["type"])
        if ftype is not None and "choices" in ftype.spec_keys:
            spec["choices"] = _choice_lines(post.get(p + "choices", ""))
        if ftype is not None and "exclusive" in ftype.spec_keys:
            exclusive = _choice_lines(post.get(p + "exclusive", ""))
            if exclusive:
                spec["exclusive"] = exclusive
        parent = post.get(p + "visible_field", "").strip()
        if parent:
            spec["visible_if"] = {"field": parent, "in": _choice_lines(post.get(p + "visible_in", ""))}
        threshold = post.get(p + "threshold", "").strip()
        if threshold:
            try:
                spec["threshold"] = float(threshold)
            except ValueError:
                problems[where] = "the disagreement threshold must be a number between 0 and 1"
        fields.append(spec)
    return {"fields": fields}, problems


def form_rows(schema: dict) -> list[dict]:
    """The editor form's rows for a schema (the inverse of schema_from_form)."""
    rows = []
    for spec in schema.get("fields", []):
        if not isinstance(spec, dict):
            continue
        cond = spec.get("visible_if") if isinstance(spec.get("visible_if"), dict) else {}
        extra = {k: v for k, v in spec.items() if k not in FORM_KEYS}
        rows.append(
            {
                "name": spec.get("name", ""),
                "type": spec.get("type", ""),
                "label": spec.get("label", ""),
                "help": spec.get("help", ""),
                "required": bool(spec.get("required")),
                "choices": "\n".join(map(str, spec.get("choices") or [])),
                "exclusive": "\n".join(map(str, spec.get("exclusive") or [])),
                "visible_field": cond.get("field", ""),
                "visible_in": "\n".join(map(str, cond.get("in") or [])),
                "threshold": "" if spec.get("threshold") is None else spec["threshold"],
                "extra": json.dumps(extra, ensure_ascii=False) if extra else "",
            }
        )
    return rows


def form_move(schema: dict, action: str) -> dict:
    """Apply an editor button (add, remove:i, up:i, down:i) to the schema the form holds."""
    fields = list(schema.get("fields", []))
    verb, _, arg = action.partition(":")
    if verb == "add":
        taken = {f.get("name") for f in fields if isinstance(f, dict)}
        n = len(fields) + 1
        while f"field_{n}" in taken:
            n += 1
        fields.append({"name": f"field_{n}", "type": "choice", "choices": []})
        return {**schema, "fields": fields}
    try:
        i = int(arg)
    except ValueError:
        return schema
    if not 0 <= i < len(fields):
        return schema
    if verb == "remove":
        fields.pop(i)
    elif verb == "up" and i > 0:
        fields[i - 1], fields[i] = fields[i], fields[i - 1]
    elif verb == "down" and i < len(fields) - 1:
        fields[i + 1], fields[i] = fields[i], fields[i + 1]
    return {**schema, "fields": fields}
