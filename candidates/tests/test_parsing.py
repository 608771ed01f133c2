from __future__ import annotations

import json

import pytest

from candidates.parsing import ReplyParseError, extract_json_object, parse_reply
from projects.presets import MEME3W_SCHEMA
from projects.schema import Schema

SCHEMA = Schema(MEME3W_SCHEMA)
TEXT = "Zorgians cannot be trusted with coffee"
GOOD = {
    "think": "steps",
    "label": "harmful",
    "target_category": "group background",
    "target_entity": "Zorgians",
    "text_mention": "Zorgians",
    "visual_region": [[10, 20, 300, 400]],
}


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps(GOOD),
        "```json\n" + json.dumps(GOOD, indent=2) + "\n```",
        "Here is my answer:\n" + json.dumps(GOOD) + "\nHope this helps.",
        json.dumps(GOOD)[:-1] + ",}",  # trailing comma
        "Sure.\n```\n" + json.dumps(GOOD, indent=1).replace("\n}", ",\n}") + "\n```",
        "<think>first {maybe} this</think>\n" + json.dumps(GOOD),
        json.dumps({"think": "steps", "answer": {k: v for k, v in GOOD.items() if k != "think"}}),
        str({**GOOD, "text_mention": "Zorgians"}),  # Python dict repr (single quotes)
    ],
)
def test_real_world_reply_shapes_give_the_same_fields(reply):
    parsed = parse_reply(reply, schema=SCHEMA, item_text=TEXT)
    assert parsed.error == ""
    assert parsed.fields == {k: v for k, v in GOOD.items() if k != "think"}
    assert parsed.think == "steps"
    assert all(r.get("partial") for r in parsed.removed)  # at most a flattening note


def test_prefers_the_object_with_the_schema_fields():
    reply = 'Example: {"foo": 1}\nAnswer: ' + json.dumps(GOOD)
    assert extract_json_object(reply, expected_keys={"label"})["label"] == "harmful"


def test_braces_inside_strings_do_not_confuse_the_scanner():
    obj = {**GOOD, "think": 'a } brace and a { brace and \\" quote'}
    assert extract_json_object("prose " + json.dumps(obj) + " more")["think"] == obj["think"]


@pytest.mark.parametrize("reply", ["", "   ", "I cannot help with that.", "{{{{", "[1, 2, 3]"])
def test_no_json_object_is_a_parse_error_not_a_crash(reply):
    with pytest.raises(ReplyParseError):
        extract_json_object(reply)
    parsed = parse_reply(reply, schema=SCHEMA, item_text=TEXT)
    assert parsed.error and parsed.fields == {}


def test_malformed_fields_are_removed_and_recorded_never_the_candidate():
    reply = json.dumps(
        {
            "think": "x",
            "label": "harmful",
            "target_category": "aliens",  # not a category
            "target_entity": ["not", "text"],
            "text_mention": "trusted with tea",  # not in the item text
            "visual_region": [[0.1, 0.2, 0.5, 0.9], [100, 100, 1500, 900], [50, 60, 400, 700]],
            "confidence": 0.9,
        }
    )
    parsed = parse_reply(reply, schema=SCHEMA, item_text=TEXT)
    assert parsed.error == ""
    assert parsed.fields == {"label": "harmful", "visual_region": [[50, 60, 400, 700]]}
    by_field = {}
    for r in parsed.removed:
        by_field.setdefault(r["field"], []).append(r["reason"])
    assert set(by_field) == {"target_category", "target_entity", "text_mention", "visual_region", "confidence"}
    assert any("0-1" in reason for reason in by_field["visual_region"])  # not rescaled, dropped
    assert any("[0, 1000]" in reason for reason in by_field["visual_region"])
    assert by_field["confidence"] == ["not a field of the schema"]


def test_missing_fields_are_recorded():
    parsed = parse_reply(json.dumps({"label": "non-harmful"}), schema=SCHEMA, item_text=TEXT)
    assert parsed.fields == {"label": "non-harmful"}
    assert {r["field"] for r in parsed.removed} == {"target_category", "target_entity", "text_mention", "visual_region"}
    assert all(r["reason"] == "missing" for r in parsed.removed)


def test_removed_values_are_bounded():
    parsed = parse_reply(json.dumps({**GOOD, "junk": "x" * 10000}), schema=SCHEMA, item_text=TEXT)
    junk = next(r for r in parsed.removed if r["field"] == "junk")
    assert len(junk["value"]) < 600


def test_a_truncated_reply_keeps_its_complete_fields_and_drops_the_cut_one():
    """A reply cut off at the token limit (json-repair): the finished fields are kept, the field
    cut in the middle fails its own validation and is removed with the reason."""
    reply = 'Step 1: ... ```json\n{"think": "harmful: mocks Zorgs", "label": "harmful", "target_category": "gen'
    parsed = parse_reply(reply, schema=SCHEMA, item_text="Zorgs again")
    assert parsed.error == "" and parsed.fields["label"] == "harmful" and parsed.think == "harmful: mocks Zorgs"
    assert "target_category" not in parsed.fields
    assert any(r["field"] == "target_category" for r in parsed.removed)
