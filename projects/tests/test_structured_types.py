"""The two structured field types added through the registry alone: checklist and pairlist.

Validation, cross-field links, candidate normalization, comparison for adjudication, agreement,
display and the Parquet export column, each on hand-made values.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from metrics.text import token_f1
from projects.fieldtypes import AGREE, DISAGREE, MINOR, REGISTRY, Context, FieldError, SchemaError
from projects.schema import Schema
from quality.agreement import Unit, agreement_figures

VIKR_LIKE = Schema(
    {
        "version": 1,
        "fields": [
            {"name": "visual", "type": "checklist", "label": "Visual", "id_prefix": "V", "required": True},
            {
                "name": "identity",
                "type": "checklist",
                "label": "Identity",
                "id_prefix": "I",
                "link_to": "visual",
                "link_required": True,
            },
            {"name": "metaphors", "type": "pairlist", "label": "Visual metaphors"},
        ],
    }
)
CHECK, PAIRS = REGISTRY["checklist"], REGISTRY["pairlist"]
SPEC = VIKR_LIKE.by_name


def test_checklist_validates_ids_texts_and_counts():
    ok = CHECK.validate(SPEC["visual"], [{"id": "V1", "text": " a man in a suit "}], Context())
    assert ok == [{"id": "V1", "text": "a man in a suit", "link": None}]
    bad = [
        ([{"id": "V1", "text": ""}], "needs a text"),
        ([{"id": "V1", "text": "a"}, {"id": "V1", "text": "b"}], "appears twice"),
        ([{"id": "V 1", "text": "a"}], "must be 1-20 letters"),
        ([{"text": "a"}], "needs an id"),
        ([{"id": f"V{i}", "text": "x"} for i in range(5)], "at most 4"),
        ([], "at least 1"),
        ("a man", "must be a list"),
        ([{"id": "V1", "text": "a", "link": "V9"}], "no linked field"),
    ]
    for value, message in bad:
        with pytest.raises(FieldError, match=message):
            CHECK.validate(SPEC["visual"], value, Context())


def test_a_link_to_a_missing_id_is_an_error_naming_both():
    record = {
        "visual": [{"id": "V1", "text": "a man in a suit"}],
        "identity": [{"id": "I1", "text": "the man is a politician", "link": "V2"}],
        "metaphors": [],
    }
    result = VIKR_LIKE.validate(record)
    assert result.errors == {"identity": "item I1 links to 'V2', which is not an item of visual"}
    record["identity"][0]["link"] = "V1"
    assert VIKR_LIKE.validate(record).ok
    record["identity"][0]["link"] = None
    assert "must name the visual item" in VIKR_LIKE.validate(record).errors["identity"]


def test_schema_refuses_a_link_to_a_field_of_another_type():
    with pytest.raises(SchemaError, match="link_to must name another field of type 'checklist'"):
        Schema({"fields": [{"name": "a", "type": "text"}, {"name": "b", "type": "checklist", "link_to": "a"}]})
    with pytest.raises(SchemaError, match="parts must be 2-4"):
        Schema({"fields": [{"name": "m", "type": "pairlist", "parts": ["only"]}]})


def test_candidates_are_normalized_leniently_and_broken_links_removed():
    fields, removed = VIKR_LIKE.normalize_candidate(
        {
            "visual": ["a man in a suit", "a podium", "", "a flag", "a crowd", "a fifth thing"],
            "identity": [{"id": "I1", "text": "the man is a politician", "link": "V7"}],
            "metaphors": ["podium -> authority", {"vehicle": "flag"}],
        }
    )
    assert [e["id"] for e in fields["visual"]] == ["V1", "V2", "V4"]  # ids assigned, empty dropped, 4 kept
    assert "identity" not in fields  # its link names no visual item: the field goes, the candidate stays
    assert fields["metaphors"] == [{"vehicle": "podium", "meaning": "authority"}]
    reasons = {r["field"]: r["reason"] for r in removed}
    assert "links to 'V7'" in reasons["identity"] and "no meaning" in reasons["metaphors"]


def test_pairlist_parts_and_validation():
    value = [{"vehicle": "Tom cat", "meaning": "the meme poster"}, {"vehicle": " ", "meaning": " "}]
    assert PAIRS.validate(SPEC["metaphors"], value, Context()) == [{"vehicle": "Tom cat", "meaning": "the meme poster"}]
    with pytest.raises(FieldError, match="needs its meaning"):
        PAIRS.validate(SPEC["metaphors"], [{"vehicle": "Tom cat"}], Context())
    with pytest.raises(FieldError, match="unknown part"):
        PAIRS.validate(SPEC["metaphors"], [{"vehicle": "a", "meaning": "b", "tenor": "c"}], Context())
    assert PAIRS.display_text(SPEC["metaphors"], value[:1]) == "Tom cat → the meme poster"


def test_comparison_is_order_free_and_uses_the_best_one_to_one_match():
    th = {"text_f1": 0.7}
    a = [{"id": "V1", "text": "a man in a suit"}, {"id": "V2", "text": "a podium"}]
    b = [{"id": "V1", "text": "a podium", "link": None}, {"id": "V2", "text": "a man in a suit"}]
    assert CHECK.compare(SPEC["visual"], a, b, thresholds=th, lexicon=None) == AGREE
    c = [{"id": "V1", "text": "a man in a grey suit"}, {"id": "V2", "text": "a podium"}]
    expected = (token_f1("a man in a suit", "a man in a grey suit") + 1.0) / 2
    assert CHECK.similarity(SPEC["visual"], a, c, lexicon=None) == pytest.approx(expected)
    assert CHECK.compare(SPEC["visual"], a, c, thresholds=th, lexicon=None) == MINOR
    assert CHECK.compare(SPEC["visual"], a, a[:1], thresholds=th, lexicon=None) == DISAGREE  # 1 of 2 matched: 0.5
    assert CHECK.compare({**SPEC["visual"], "threshold": 0.4}, a, a[:1], thresholds=th, lexicon=None) == MINOR
    p = [{"vehicle": "Tom", "meaning": "the poster"}]
    q = [{"vehicle": "Tom cat", "meaning": "the poster"}]
    assert PAIRS.similarity(SPEC["metaphors"], p, q, lexicon=None) == pytest.approx(
        (token_f1("Tom", "Tom cat") + 1) / 2
    )


def test_agreement_is_the_mean_best_match_similarity():
    one = {"visual": [{"id": "V1", "text": "a man"}], "identity": [], "metaphors": [{"vehicle": "x", "meaning": "y"}]}
    two = {"visual": [{"id": "V1", "text": "a man"}, {"id": "V2", "text": "a dog"}], "identity": [], "metaphors": []}
    results = agreement_figures(VIKR_LIKE, [Unit(1, (one, one), (1, 2)), Unit(2, (one, two), (1, 2))], lexicon=None)
    visual = next(r for r in results if r.plan.name == "visual")
    assert visual.plan.metric == "checklist_f1" and visual.primary["key"] == "mean"
    assert visual.primary["value"] == pytest.approx((1.0 + 0.5) / 2)
    metaphors = next(r for r in results if r.plan.name == "metaphors")
    assert metaphors.primary["value"] == pytest.approx((1.0 + 0.0) / 2)


def test_export_columns_are_nested_structs():
    visual = pa.array([[{"id": "V1", "text": "a man", "link": None}]], type=CHECK.arrow_type(SPEC["visual"]))
    assert visual.type == pa.list_(pa.struct([("id", pa.string()), ("text", pa.string()), ("link", pa.string())]))
    parts = {"name": "m", "type": "pairlist", "parts": ["source", "target", "why"]}
    assert PAIRS.arrow_type(parts) == pa.list_(
        pa.struct([("source", pa.string()), ("target", pa.string()), ("why", pa.string())])
    )
    assert "vehicle" in PAIRS.prompt_value(SPEC["metaphors"]) and "link" in CHECK.prompt_value(SPEC["identity"])
