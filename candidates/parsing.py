"""Reading a model's reply: find the JSON object, then normalize it with the schema engine.

Real replies wrap the object in a ```json fence, put prose before or after it, leave trailing
commas, write Python literals (None/True), nest the fields under "answer", or stop mid-object
at a token limit. We find the candidate objects ourselves (so that the one holding most of the
schema's keys wins when a reply restates its answer) and let json-repair repair each one; we
never guess at field values: field validation is the schema engine's job
(``Schema.normalize_candidate``), which removes a malformed field, never the whole candidate.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import json_repair

THINK_MAX = 20000
FENCE = re.compile(r"```(?:json|JSON|javascript)?\s*\n?(.*?)```", re.S)
NEST_KEYS = ("answer", "annotation", "result", "output", "prediction")


class ReplyParseError(ValueError):
    """No JSON object could be read from the reply."""


def _balanced_objects(text: str):
    """Yield every top-level ``{...}`` substring, honouring strings and escapes."""
    depth, start, in_str, esc, quote = 0, None, False, False, ""
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                in_str = False
            continue
        if ch in "\"'" and depth > 0:
            # Single quotes only open a string inside an object that uses them as quotes; an
            # apostrophe in prose outside any object is ignored because depth is 0 there.
            if ch == '"' or _single_quoted_key_context(text, i):
                in_str, quote = True, ch
            continue
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0 and start is not None:
                yield text[start : i + 1]
                start = None


def _single_quoted_key_context(text: str, i: int) -> bool:
    prev = text[:i].rstrip()[-1:]
    return prev in ("{", ",", ":", "[")


def _loads(text: str):
    """Strict JSON first; else json-repair (trailing commas, Python literals, single quotes,
    unquoted keys, and replies cut off mid-object: what it can close is kept, and a broken
    field is then removed by the schema, never the whole candidate)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        value = json_repair.loads(text)
    except (ValueError, RecursionError, TypeError, IndexError):
        return None
    return value if isinstance(value, dict) else None


def extract_json_object(text: str, *, expected_keys: set[str] | None = None) -> dict:
    """The JSON object in a reply, preferring the one holding most ``expected_keys``."""
    if not isinstance(text, str) or not text.strip():
        raise ReplyParseError("the reply is empty")
    text = text.strip().lstrip("\ufeff")
    # Reasoning models may prepend a <think>...</think> block that can itself contain braces.
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.S).strip()
    whole = _loads(text)
    if isinstance(whole, dict):
        return whole
    candidates: list[str] = [m.group(1).strip() for m in FENCE.finditer(text)]
    candidates += list(_balanced_objects(text))
    if "{" in text:
        # A reply cut off mid-object (token limit) has no balanced object: repair from its start.
        candidates.append(text[text.index("{") :])
    parsed = [obj for obj in (_loads(c) for c in candidates) if isinstance(obj, dict)]
    if not parsed:
        raise ReplyParseError("no JSON object found in the reply")
    keys = expected_keys or set()
    # Most expected keys first, then the later object (models tend to restate the final answer).
    best = max(enumerate(parsed), key=lambda p: (len(keys & _flat_keys(p[1])), p[0]))
    return best[1]


def _flat_keys(obj: dict) -> set[str]:
    keys = set(obj)
    for k in NEST_KEYS:
        if isinstance(obj.get(k), dict):
            keys |= set(obj[k])
    return keys


@dataclass
class ParsedReply:
    fields: dict
    removed: list[dict]
    think: str = ""
    error: str = ""
    notes: list[str] = field(default_factory=list)


def parse_reply(text: str, *, schema, item_text: str) -> ParsedReply:
    """Extract, flatten and normalize a reply. Never raises on bad model output."""
    names = set(schema.names)
    try:
        obj = extract_json_object(text, expected_keys=names | {"think"})
    except ReplyParseError as exc:
        return ParsedReply(fields={}, removed=[], error=str(exc))
    removed: list[dict] = []
    if not (names & set(obj)):
        for k in NEST_KEYS:
            if isinstance(obj.get(k), dict) and names & set(obj[k]):
                outer = {kk: vv for kk, vv in obj.items() if kk != k}
                obj = {**outer, **obj[k]}
                removed.append(
                    {"field": k, "reason": f"fields were nested under {k!r}; flattened", "value": None, "partial": True}
                )
                break
    think = obj.get("think")
    if think is not None and not isinstance(think, str):
        think = json.dumps(think, ensure_ascii=False)
    for key in sorted(set(obj) - names - {"think"}):
        removed.append({"field": key, "reason": "not a field of the schema", "value": _preview(obj[key])})
    fields, schema_removed = schema.normalize_candidate(
        {k: v for k, v in obj.items() if k in names}, item_text=item_text
    )
    for r in schema_removed:
        r = dict(r)
        r["value"] = _preview(r.get("value"))
        removed.append(r)
    return ParsedReply(fields=fields, removed=removed, think=(think or "")[:THINK_MAX])


def _preview(value, limit: int = 500):
    """Removed values are kept for leads, but bounded: a model can emit anything."""
    try:
        dumped = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        dumped = repr(value)
    return value if len(dumped) <= limit else dumped[:limit] + "…"
