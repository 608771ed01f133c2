from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metrics.entity import (
    TABLE8_LEXICON,
    TABLE8_PAIRS,
    Lexicon,
    canonicalize,
    f1_rel,
    f1_rel_batch,
)
from metrics.tests.strategies import FAST, optional_mixed_text


def test_table8_pairs_are_the_paper_rows() -> None:
    # Meme3W Table 8, in order.
    assert TABLE8_PAIRS == (
        ("women", "woman", True),
        ("Muslim people", "Muslims", True),
        ("Jewish people", "Jews", True),
        ("LGBTQ people", "LGBTQ community", True),
        ("immigrants", "refugees", False),
        ("Asian people", "Chinese people", False),
        ("Black women", "women", False),
    )
    assert TABLE8_LEXICON == {
        "woman": "women",
        "Muslims": "Muslim people",
        "Jews": "Jewish people",
        "LGBTQ community": "LGBTQ people",
    }


@pytest.mark.parametrize(("a", "b"), [(a, b) for a, b, same in TABLE8_PAIRS if same])
def test_table8_same_form(a: str, b: str) -> None:
    assert canonicalize(a, TABLE8_LEXICON) == canonicalize(b, TABLE8_LEXICON)
    assert f1_rel(a, b, TABLE8_LEXICON) == 1.0
    # Case/punctuation variants reach the same form too.
    assert f1_rel(a.upper() + "!", f" {b.lower()} ", TABLE8_LEXICON) == 1.0


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("immigrants", "refugees", 0.0),
        ("Asian people", "Chinese people", 0.5),
        ("Black women", "women", 2 / 3),
    ],
)
def test_table8_distinct(a: str, b: str, expected: float) -> None:
    assert canonicalize(a, TABLE8_LEXICON) != canonicalize(b, TABLE8_LEXICON)
    score = f1_rel(a, b, TABLE8_LEXICON)
    assert score == pytest.approx(expected)
    assert score < 0.7  # tau_e: distinct for JRA and agreement


def test_lexicon_is_what_makes_variants_equal() -> None:
    assert f1_rel("women", "woman") == 0.0
    assert f1_rel("Muslim people", "Muslims") == 0.0
    assert f1_rel("LGBTQ people", "LGBTQ community") == 0.5
    assert canonicalize("Muslims", TABLE8_LEXICON) == "muslim people"
    assert canonicalize("Muslims") == "muslims"


def test_lexicon_normalizes_keys_and_values() -> None:
    lex = {"  MUSLIMS! ": "The Muslim People."}
    assert canonicalize("muslims", lex) == "muslim people"
    assert Lexicon(lex).to_dict() == {"muslims": "muslim people"}
    # whole-string mapping only: a sub-phrase is not rewritten
    assert canonicalize("young Muslims", lex) == "young muslims"


def test_lexicon_rejects_bad_entries() -> None:
    with pytest.raises(ValueError, match="both"):
        Lexicon({"Muslims": "Muslim people", "muslims.": "Islam"})
    with pytest.raises(ValueError, match="chain"):
        Lexicon({"woman": "women", "women": "females"})
    with pytest.raises(ValueError, match="empty"):
        Lexicon({"the": "women"})
    with pytest.raises(ValueError, match="empty"):
        Lexicon({"women": "!!!"})
    # an identity entry and a duplicate that agrees are fine
    lex = Lexicon([("women", "women"), ("woman", "women"), ("Woman", "women")])
    assert len(lex) == 2 and lex["woman"] == "women" and set(lex) == {"women", "woman"}


def test_absent_entities() -> None:
    for x in (None, "", "  ", "the", "?!"):
        assert canonicalize(x, TABLE8_LEXICON) is None
        assert f1_rel(x, None) == 1.0
        assert f1_rel(x, "women") == 0.0


def test_cjk_entity_tokens() -> None:
    assert f1_rel("中国人", "中国", {"中国人民": "中国人"}) == pytest.approx(2 * 2 / 5)
    assert f1_rel("中国人民", "中国人", {"中国人民": "中国人"}) == 1.0


@FAST
@given(optional_mixed_text, optional_mixed_text)
def test_f1_rel_properties(a: str | None, b: str | None) -> None:
    lex = Lexicon({"the women": "women", "中国": "中国人", "abt": "b a"})
    f = f1_rel(a, b, lex)
    assert f == f1_rel(b, a, lex)
    assert 0.0 <= f <= 1.0
    assert f1_rel(a, a, lex) == 1.0
    c = canonicalize(a, lex)
    assert canonicalize(c, lex) == c  # a validated lexicon is idempotent


@FAST
@given(
    st.lists(
        st.tuples(
            optional_mixed_text, st.sampled_from([None, "women", "woman", "Muslims", "Jews", "Black women", "中国人"])
        ),
        max_size=20,
    )
)
def test_f1_rel_batch_equals_scalar(pairs: list[tuple[str | None, str | None]]) -> None:
    a = [p[0] for p in pairs] + ["woman", "Jews", None]
    b = [p[1] for p in pairs] + ["women", "Jews", None]
    batch = f1_rel_batch(a, b, TABLE8_LEXICON)
    assert batch.tolist() == [f1_rel(x, y, TABLE8_LEXICON) for x, y in zip(a, b)]
    assert f1_rel_batch(a, b, Lexicon(TABLE8_LEXICON)).tolist() == batch.tolist()


def test_f1_rel_batch_errors() -> None:
    with pytest.raises(ValueError):
        f1_rel_batch(["a"], [])
    with pytest.raises(TypeError):
        f1_rel_batch([1], [1])  # type: ignore[list-item]


def test_plain_dict_lexicon_is_never_stale() -> None:
    lex = {"woman": "women"}
    assert f1_rel("woman", "women", lex) == 1.0
    lex["woman"] = "females"  # edited in place: the content-keyed cache must not serve the old one
    assert f1_rel("woman", "women", lex) == 0.0
    assert canonicalize("woman", lex) == "females"
    with pytest.raises(ValueError):
        f1_rel("a", "b", {"x": "y", "y": "z"})
