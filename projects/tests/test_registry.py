"""The field-type registry is complete: every type has each part the pages, reports, exports and
prompts ask it for (CONVENTIONS "The schema engine is one registry of field types").

A new type fails here, naming what it lacks, until it has its template, its widget entry, its
metadata and working value methods.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from projects.fieldtypes import REGISTRY, Agreement, Context, FieldError, FieldType
from projects.schema import Schema

ROOT = Path(__file__).resolve().parents[2]
WIDGETS_JS = ROOT / "static" / "fields" / "widgets.js"
ITEM_TEXT = "When the people from Planet Zorg land and ask for the wifi password"

#: A spec and a valid value per type: (spec, value). A type missing here fails the test.
SAMPLES: dict[str, tuple[dict, object]] = {
    "choice": ({"name": "label", "type": "choice", "choices": ["harmful", "non-harmful"]}, "harmful"),
    "multichoice": (
        {"name": "kinds", "type": "multichoice", "choices": ["Mocking", "Slurs", "Other"], "exclusive": ["Other"]},
        ["Mocking", "Slurs"],
    ),
    "entity": ({"name": "target_entity", "type": "entity"}, "people from Planet Zorg"),
    "span": ({"name": "text_mention", "type": "span", "source": "text"}, "people from Planet Zorg"),
    "boxes": ({"name": "visual_region", "type": "boxes"}, [[100, 120, 400, 500], [500, 80, 900, 700]]),
    "text": ({"name": "caption", "type": "text"}, "Aliens ask for the wifi password first."),
    "textlist": ({"name": "captions", "type": "textlist"}, ["Aliens want wifi", "Priorities"]),
    "checklist": (
        {"name": "visual", "type": "checklist", "id_prefix": "V"},
        [{"id": "V1", "text": "a spaceship lands", "link": None}, {"id": "V2", "text": "a router", "link": None}],
    ),
    "pairlist": (
        {"name": "metaphors", "type": "pairlist"},
        [{"vehicle": "spaceship", "meaning": "newcomers"}, {"vehicle": "router", "meaning": "modern needs"}],
    ),
}


def _skip_js(src: str, i: int) -> int:
    """Index after the string, template literal or comment starting at ``src[i]`` (else i)."""
    c = src[i]
    if c in "'\"`":
        j = i + 1
        while j < len(src) and src[j] != c:
            j += 2 if src[j] == "\\" else 1
        return j + 1
    if src.startswith("//", i):
        return src.index("\n", i)
    if src.startswith("/*", i):
        return src.index("*/", i) + 2
    return i


def _block(src: str, start: int) -> str:
    """The text of the {...} block whose opening brace is at ``src[start]``."""
    depth, i = 0, start
    while i < len(src):
        j = _skip_js(src, i)
        if j != i:
            i = j
            continue
        if src[i] == "{":
            depth += 1
        elif src[i] == "}":
            depth -= 1
            if depth == 0:
                return src[start : i + 1]
        i += 1
    raise AssertionError("unbalanced braces in static/fields/widgets.js")


def _top_level_names(block: str) -> set[str]:
    """Keys and method names at the first level of an object literal's body (the first name of
    each top-level entry, i.e. at the start or after a top-level comma)."""
    names, depth, i, expect_key = set(), 0, 0, True
    body = block[1:-1]
    while i < len(body):
        j = _skip_js(body, i)
        if j != i:
            i = j
            continue
        c = body[i]
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        elif depth == 0 and c == ",":
            expect_key = True
        elif depth == 0 and expect_key and not c.isspace():
            m = re.match(r"(?:async\s+)?([A-Za-z_$][\w$]*)", body[i:])
            if m:
                names.add(m.group(1))
                i += m.end()
            expect_key = False
            continue
        i += 1
    return names


def js_widgets() -> dict[str, set[str]]:
    """{widget name: its methods} from ``export const WIDGETS = {...}`` and the objects it names."""
    src = WIDGETS_JS.read_text()
    m = re.search(r"export\s+const\s+WIDGETS\s*=\s*\{", src)
    assert m, "static/fields/widgets.js has no `export const WIDGETS = {...}`"
    entries = {}
    for part in _block(src, m.end() - 1)[1:-1].split(","):
        part = part.strip()
        if not part:
            continue
        key, _, ident = (p.strip() for p in part.partition(":"))
        ident = ident or key
        d = re.search(rf"(?:const|let|var)\s+{re.escape(ident)}\s*=\s*\{{", src)
        assert d, f"WIDGETS.{key} names {ident}, which is not an object literal in widgets.js"
        entries[key.strip("'\"")] = _top_level_names(_block(src, d.end() - 1))
    return entries


def test_the_widget_parser_reads_methods_not_nested_names():
    block = "{ read(el) { const x = { write: 1 }; return x; }, write(el, v) {}, absent() { return []; }, init: f }"
    assert _top_level_names(block) == {"read", "write", "absent", "init"}


def test_every_type_has_a_sample():
    assert set(SAMPLES) == set(REGISTRY), f"give these types a sample here: {set(REGISTRY) ^ set(SAMPLES)}"


def missing_parts(ftype: FieldType) -> list[str]:
    """What a type lacks, in words fit for a failure message."""
    missing = []
    for attr in ("name", "widget", "label"):
        if not isinstance(getattr(ftype, attr, None), str) or not getattr(ftype, attr):
            missing.append(attr)
    if not isinstance(getattr(ftype, "agreement", None), Agreement):
        missing.append("agreement (an Agreement)")
    if isinstance(getattr(ftype, "widget", None), str):
        if not (ROOT / "templates" / ftype.template).is_file():
            missing.append(f"its template {ftype.template}")
        widgets = js_widgets()
        if ftype.widget not in widgets:
            missing.append(f"an entry {ftype.widget!r} in WIDGETS of static/fields/widgets.js")
        else:
            lacking = {"read", "write", "absent"} - widgets[ftype.widget]
            if lacking:
                missing.append(f"WIDGETS.{ftype.widget}.{', '.join(sorted(lacking))} in static/fields/widgets.js")
    for method in ("display_text", "shape_error", "arrow_type", "prompt_value", "widget_config", "similarity"):
        if not callable(getattr(ftype, method, None)):
            missing.append(method)
    if type(ftype).validate is FieldType.validate:
        missing.append("its own validate")
    return missing


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_type_is_complete(name):
    ftype = REGISTRY[name]
    assert ftype.name == name, f"REGISTRY[{name!r}].name is {ftype.name!r}"
    missing = missing_parts(ftype)
    assert not missing, f"field type {name!r} lacks: {'; '.join(missing)}"


def test_an_incomplete_type_is_named_with_what_it_lacks():
    class HalfDone(FieldType):
        name = "half"
        widget = "nowhere"

    missing = missing_parts(HalfDone())
    assert "label" in missing and "agreement (an Agreement)" in missing and "its own validate" in missing
    assert "its template fields/nowhere.html" in missing
    assert "an entry 'nowhere' in WIDGETS of static/fields/widgets.js" in missing


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_type_methods_work_on_a_sample(name):
    ftype = REGISTRY[name]
    spec, value = SAMPLES[name]
    Schema({"fields": [spec]})  # the sample spec is a valid schema
    ctx = Context(item_text=ITEM_TEXT)
    try:
        clean = ftype.validate(spec, value, ctx)
    except FieldError as exc:
        pytest.fail(f"{name}: validate refuses its sample value: {exc}")
    assert ftype.shape_error(spec, clean) is None, f"{name}: shape_error refuses a valid value"
    assert ftype.shape_error(spec, ftype.absent(spec)) is None or ftype.absent(spec) is None
    shown = ftype.display_text(spec, clean)
    assert isinstance(shown, str) and shown and shown != "—", f"{name}: display_text of a value is {shown!r}"
    assert ftype.display_text(spec, ftype.absent(spec)) in ("—", "no box"), f"{name}: display_text of absence"
    assert isinstance(ftype.arrow_type(spec), pa.DataType)
    assert isinstance(ftype.prompt_value(spec), str) and ftype.prompt_value(spec)
    assert isinstance(ftype.widget_config(spec), dict)
    assert ftype.is_absent(spec, ftype.absent(spec))
    assert not ftype.is_absent(spec, clean)
    # What the widget writes is what validate accepts (the JS widgets write this shape).
    assert ftype.validate(spec, clean, ctx) == clean


def test_checklist_links_are_checked_across_fields():
    schema = Schema(
        {
            "fields": [
                {"name": "visual", "type": "checklist", "id_prefix": "V"},
                {"name": "identity", "type": "checklist", "id_prefix": "I", "link_to": "visual", "link_required": True},
            ]
        }
    )
    ok = schema.validate(
        {
            "visual": [{"id": "V1", "text": "a man", "link": None}],
            "identity": [{"id": "I1", "text": "the man is Zorgian", "link": "V1"}],
        }
    )
    assert ok.ok, ok.errors
    stale = schema.validate(
        {
            "visual": [{"id": "V2", "text": "a man", "link": None}],
            "identity": [{"id": "I1", "text": "the man is Zorgian", "link": "V1"}],
        }
    )
    assert "V1" in stale.errors["identity"] and "visual" in stale.errors["identity"]
