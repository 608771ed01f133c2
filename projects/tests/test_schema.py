from __future__ import annotations

import pytest

from projects.fieldtypes import AGREE, DISAGREE, MINOR, SchemaError
from projects.presets import AHA_SCHEMA, MEME3W_SCHEMA, MEMECAP_SCHEMA
from projects.schema import Schema

TEXT = "When the people from Planet Zorg ask for the wifi password"
M3 = Schema(MEME3W_SCHEMA)
AHA = Schema(AHA_SCHEMA)

HARMFUL = {
    "label": "harmful",
    "target_category": "group background",
    "target_entity": "people from Planet Zorg",
    "text_mention": "people from Planet Zorg",
    "visual_region": [[10, 20, 300, 400]],
}
NON_HARMFUL = {
    "label": "non-harmful",
    "target_category": None,
    "target_entity": None,
    "text_mention": None,
    "visual_region": [],
}


def test_all_presets_are_valid_schemas():
    for data in (MEME3W_SCHEMA, AHA_SCHEMA, MEMECAP_SCHEMA):
        Schema(data)


def test_valid_records_pass_unchanged():
    for record in (HARMFUL, NON_HARMFUL):
        r = M3.validate(record, item_text=TEXT)
        assert r.ok, r.errors
        assert r.values == record


def test_harmful_without_evidence_is_fine_but_needs_category_and_entity():
    r = M3.validate({**HARMFUL, "text_mention": None, "visual_region": []}, item_text=TEXT)
    assert r.ok
    r = M3.validate({"label": "harmful"}, item_text=TEXT)
    assert r.errors == {"target_category": "is required", "target_entity": "is required"}


def test_non_harmful_must_leave_target_fields_absent():
    r = M3.validate({**HARMFUL, "label": "non-harmful"}, item_text=TEXT)
    assert set(r.errors) == {"target_category", "target_entity", "text_mention", "visual_region"}
    assert "must be empty unless label is harmful" in r.errors["target_category"]


def test_clear_hidden_applies_absence_values():
    cleared = M3.clear_hidden({**HARMFUL, "label": "non-harmful"})
    assert cleared == NON_HARMFUL


@pytest.mark.parametrize(
    "mention,ok",
    [
        ("people from Planet Zorg", True),
        ("People from Planet Zorg", False),
        ("Zorg ", True),
        ("Martians", False),
        ("   ", False),
    ],
)
def test_mention_must_be_exact_substring(mention, ok):
    r = M3.validate({**HARMFUL, "text_mention": mention}, item_text=TEXT)
    assert r.ok is ok, r.errors


@pytest.mark.parametrize(
    "boxes,error",
    [
        ([[0, 0, 1000, 1000]], None),
        ([[10, 10, 10, 20]], "x1 < x2"),
        ([[30, 10, 20, 20]], "x1 < x2"),
        ([[10, 10, 20, 1001]], "[0, 1000]"),
        ([[-1, 10, 20, 30]], "[0, 1000]"),
        ([[1.5, 10, 20, 30]], "integers"),
        ([[10, 10, 20]], "[x1, y1, x2, y2]"),
        ([["1", 2, 3, 4]], "numbers"),
        ([[True, 2, 3, 4]], "numbers"),
        ("not a list", "list of boxes"),
    ],
)
def test_box_rules(boxes, error):
    r = M3.validate({**HARMFUL, "visual_region": boxes}, item_text=TEXT)
    if error is None:
        assert r.ok
    else:
        assert error in r.errors["visual_region"]


def test_unknown_fields_and_bad_choices_are_reported():
    r = M3.validate({**HARMFUL, "target_category": "aliens", "extra": 1}, item_text=TEXT)
    assert "must be one of" in r.errors["target_category"]
    assert "unknown field(s): extra" in r.errors["__all__"]
    assert M3.validate(["not", "a", "dict"]).errors == {"__all__": "the record must be an object"}


def test_aha_other_is_exclusive_and_conditions_follow_the_binary_label():
    hateful = {
        "is_hateful": "Hateful",
        "hateful_type": ["Mocking"],
        "targeted_categories": ["religion"],
        "non_hateful_type": [],
    }
    assert AHA.validate(hateful).ok
    r = AHA.validate({**hateful, "hateful_type": ["Other", "Mocking"]})
    assert "cannot be combined" in r.errors["hateful_type"]
    assert AHA.validate({**hateful, "hateful_type": ["Other"]}).ok
    r = AHA.validate({**hateful, "non_hateful_type": ["Humor"]})
    assert "must be empty unless is_hateful is Hateful" not in r.errors.get("non_hateful_type", "")
    assert "non_hateful_type" in r.errors
    r = AHA.validate({"is_hateful": "Not-Hateful", "non_hateful_type": []})
    assert r.errors == {"non_hateful_type": "is required"}
    # Stored in schema order: equal sets compare equal.
    assert AHA.validate({**hateful, "hateful_type": ["Slurs", "Mocking"]}).values["hateful_type"] == [
        "Mocking",
        "Slurs",
    ]


def test_candidate_normalization_removes_bad_fields_only():
    raw = {
        "think": "analysis",
        "label": "Harmful",
        "target_category": "Group_Background",
        "target_entity": "  Zorgians ",
        "text_mention": "Martians",  # not in the text
        "visual_region": [[100, 100, 200, 200], [0.1, 0.2, 0.5, 0.6], [10, 10, 2000, 20], [5, 5, 50]],
    }
    fields, removed = M3.normalize_candidate(raw, item_text=TEXT)
    assert fields == {
        "label": "harmful",
        "target_category": "group background",
        "target_entity": "Zorgians",
        "visual_region": [[100, 100, 200, 200]],
    }
    reasons = {(r["field"], r["reason"]) for r in removed}
    assert ("text_mention", "must be copied exactly from the item text") in reasons
    assert any("0-1 coordinates" in r for f, r in reasons if f == "visual_region")
    assert sum(1 for f, _ in reasons if f == "visual_region") == 3


def test_candidate_with_no_valid_box_loses_only_that_field_and_missing_fields_are_recorded():
    fields, removed = M3.normalize_candidate(
        {"label": "harmful", "visual_region": [[0.1, 0.1, 0.2, 0.2]]}, item_text=TEXT
    )
    assert fields == {"label": "harmful"}
    assert {r["field"] for r in removed} == {"target_category", "target_entity", "text_mention", "visual_region"}


def test_candidate_breaking_a_condition_loses_the_field():
    fields, removed = M3.normalize_candidate({**NON_HARMFUL, "target_category": "gender"}, item_text=TEXT)
    assert "target_category" not in fields
    assert removed[0]["field"] == "target_category"


@pytest.mark.parametrize(
    "data,message",
    [
        ({"fields": []}, "non-empty list"),
        ({"fields": [{"name": "Bad Name", "type": "choice", "choices": ["a"]}]}, "bad field name"),
        ({"fields": [{"name": "a", "type": "nope"}]}, "unknown type"),
        ({"fields": [{"name": "a", "type": "choice", "choices": []}]}, "choices"),
        ({"fields": [{"name": "a", "type": "entity", "visible_if": {"field": "zzz", "in": ["x"]}}]}, "visible_if"),
        ({"fields": [{"name": "a", "type": "entity"}, {"name": "a", "type": "entity"}]}, "twice"),
        ({"fields": [{"name": "a", "type": "multichoice", "choices": ["x"], "exclusive": ["y"]}]}, "exclusive"),
    ],
)
def test_bad_schemas_are_refused_with_a_reason(data, message):
    with pytest.raises(SchemaError, match=message):
        Schema(data)


def test_compare_marks_agree_minor_disagree():
    a = HARMFUL
    same = dict(HARMFUL)
    assert set(M3.compare(a, same).values()) == {AGREE}
    b = {**HARMFUL, "target_entity": "Planet Zorg people", "visual_region": [[12, 20, 300, 400]]}
    c = M3.compare(a, b)
    assert c["target_entity"] == MINOR and c["visual_region"] == MINOR and c["label"] == AGREE
    d = {**HARMFUL, "target_category": "gender", "text_mention": None, "visual_region": [[600, 600, 900, 900]]}
    c = M3.compare(a, d)
    assert c["target_category"] == DISAGREE and c["text_mention"] == DISAGREE and c["visual_region"] == DISAGREE
    # Box order does not matter for agreement.
    two = {**HARMFUL, "visual_region": [[1, 1, 5, 5], [10, 10, 50, 50]]}
    assert M3.compare(two, {**two, "visual_region": list(reversed(two["visual_region"]))})["visual_region"] == AGREE
    # Thresholds are per project.
    assert M3.compare(a, b, thresholds={"entity_f1": 1.01})["target_entity"] == DISAGREE


def test_entity_same_canonical_form_is_minor_and_merged_by_rule():
    from projects.fieldtypes import REGISTRY

    spec = M3.by_name["target_entity"]
    lex = {"woman": "women"}
    assert (
        M3.compare({**HARMFUL, "target_entity": "women"}, {**HARMFUL, "target_entity": "Woman"}, lexicon=lex)[
            "target_entity"
        ]
        == MINOR
    )
    merged = REGISTRY["entity"].auto_merge(spec, ["women", "Woman"], rules={"entity_canonical"}, lexicon=lex)
    assert merged == ("women", "entity_canonical")
    assert (
        REGISTRY["entity"].auto_merge(spec, ["women", "Black women"], rules={"entity_canonical"}, lexicon=lex) is None
    )
    assert REGISTRY["entity"].auto_merge(spec, ["women", "Woman"], rules=set(), lexicon=lex) is None


def test_boxes_mean_rule_matches_boxes_before_averaging():
    from projects.fieldtypes import REGISTRY

    spec = M3.by_name["visual_region"]
    a = [[0, 0, 100, 100], [500, 500, 700, 700]]
    b = [[502, 498, 704, 700], [2, 0, 100, 104]]  # same boxes, other order
    merged, rule = REGISTRY["boxes"].auto_merge(spec, [a, b], rules={"boxes_mean"}, lexicon=None)
    assert rule == "boxes_mean"
    assert merged == [[1, 0, 100, 102], [501, 499, 702, 700]]
    assert REGISTRY["boxes"].auto_merge(spec, [a, a[:1]], rules={"boxes_mean"}, lexicon=None) is None
