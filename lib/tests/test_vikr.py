"""The automated checks on a VIKR conversion (lib.vikr), on hand-made replies: one bad reply per
check, and a clean one that raises nothing."""

from __future__ import annotations

import copy

from lib.vikr import entity_names, fold, mentions, vikr_checks

GOOD = {
    "visual": [
        {"id": "V1", "text": "A boy in a blue blazer and glasses points at the viewer"},
        {"id": "V2", "text": "Caption at the top: 真相只有一个"},
        {"id": "V3", "text": "A dark silhouette stands behind him"},
    ],
    "identity": [
        {"id": "I1", "text": "The boy is Edogawa Conan (江户川柯南) from Detective Conan", "link": "V1"},
        {"id": "I2", "text": "The silhouette is the 'black-clad culprit' of the anime", "link": "V3"},
    ],
    "knowledge": [{"id": "K1", "text": "Conan's catch-phrase is 'there is only one truth'"}],
    "reasoning": [{"id": "R1", "text": "The catch-phrase is applied to an everyday triviality"}],
    "entities": [
        {"id": "I1", "names": ["Edogawa Conan", "江户川柯南", "Conan"], "work": "Detective Conan"},
    ],
}


def checks_of(reply: dict) -> list[tuple[str, str, str | None]]:
    return [(f["check"], f["field"], f["item"]) for f in vikr_checks(reply)]


def test_a_clean_reply_raises_no_flag() -> None:
    assert vikr_checks(GOOD) == []


def test_schema_a_missing_layer_a_non_list_an_item_without_text_and_a_repeated_id() -> None:
    bad = copy.deepcopy(GOOD)
    del bad["knowledge"]
    bad["reasoning"] = "the joke is the contrast"
    bad["visual"].append({"id": "V1", "text": "another boy"})
    bad["identity"].append({"id": "I3", "link": "V2"})
    got = checks_of(bad)
    assert ("schema", "knowledge", None) in got
    assert ("schema", "reasoning", None) in got
    assert ("schema", "visual", "V1") in got  # repeated id
    assert ("schema", "identity", None) in got  # no text
    messages = [f["message"] for f in vikr_checks(bad)]
    assert "knowledge: missing from the reply" in messages and "visual: id V1 appears twice" in messages


def test_count_zero_and_five_items_are_flagged() -> None:
    bad = copy.deepcopy(GOOD)
    bad["knowledge"] = []
    bad["reasoning"] = [{"id": f"R{i}", "text": f"reason {i}"} for i in range(1, 6)]
    got = [(f["check"], f["field"], f["message"]) for f in vikr_checks(bad)]
    assert ("count", "knowledge", "knowledge: 0 items; a layer holds 1 to 4") in got
    assert ("count", "reasoning", "reasoning: 5 items; a layer holds 1 to 4") in got
    assert all(c == "count" for c, *_ in got)


def test_link_missing_and_dangling() -> None:
    bad = copy.deepcopy(GOOD)
    bad["identity"][0]["link"] = "V9"
    del bad["identity"][1]["link"]
    got = {f["item"]: f["message"] for f in vikr_checks(bad) if f["check"] == "link"}
    assert got == {
        "I1": "I1: links to V9, which is not a Visual item",
        "I2": "I2: names no Visual item (link missing)",
    }


def test_entity_in_visual_case_diacritics_width_and_cjk() -> None:
    for visual_text, name in [
        ("A boy, obviously CONAN, points", "Conan"),  # case
        ("Kenan points at the viewer", "Kēnán"),  # diacritics in the name
        ("Ｃｏｎａｎ points", "Conan"),  # full-width letters
        ("画面中江户川柯南指着观众", "江户川柯南"),  # CJK: no word boundaries
        ("柯南指着观众", "柯南"),
    ]:
        bad = copy.deepcopy(GOOD)
        bad["visual"][0]["text"] = visual_text
        bad["entities"] = [{"id": "I1", "names": [name], "work": "Detective Conan"}]
        got = [f for f in vikr_checks(bad) if f["check"] == "entity_in_visual"]
        assert [f["item"] for f in got] == ["V1"], visual_text
        assert name in got[0]["message"]


def test_entity_in_visual_from_quoted_names_when_the_reply_lists_none() -> None:
    bad = copy.deepcopy(GOOD)
    del bad["entities"]
    bad["identity"][0]["text"] = "The boy is 「江户川柯南」 from 《名侦探柯南》"
    bad["visual"][2]["text"] = "名侦探柯南的海报"
    got = [f for f in vikr_checks(bad) if f["check"] == "entity_in_visual"]
    assert [f["item"] for f in got] == ["V3"] and "名侦探柯南" in got[0]["message"]


def test_whole_words_for_latin_names_substrings_for_cjk() -> None:
    assert not mentions("an announcement on the board", "Ann")
    assert mentions("Ann waves", "ann")
    assert mentions("柯南Conan合照", "Conan")  # a CJK neighbour is a boundary
    assert not mentions("Conantown", "Conan")
    assert not mentions("a boy named L", "L")  # too short to search for
    assert fold("Kēnán") == fold("KENAN") == "kenan"


def test_entity_names_merges_declared_names_and_works() -> None:
    names = entity_names(GOOD["identity"], GOOD["entities"])
    assert names["I1"] == ["Edogawa Conan", "江户川柯南", "Conan", "Detective Conan"]
    assert names["I2"] == ["black-clad culprit"]  # quoted in the text
