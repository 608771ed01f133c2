from __future__ import annotations

import re
import string
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metrics.tests.strategies import FAST, mixed_text, optional_mixed_text, squad_ascii_text
from metrics.text import (
    exact_match,
    exact_match_batch,
    is_absent,
    normalize,
    token_f1,
    token_f1_batch,
    tokens,
)


# --- Reference: the official SQuAD v1.1 evaluate script (evaluate-v1.1.py), verbatim logic.
def squad_normalize_answer(s: str) -> str:
    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text: str) -> str:
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def squad_f1_score(prediction: str, ground_truth: str) -> float:
    prediction_tokens = squad_normalize_answer(prediction).split()
    ground_truth_tokens = squad_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def squad_exact_match_score(prediction: str, ground_truth: str) -> bool:
    return squad_normalize_answer(prediction) == squad_normalize_answer(ground_truth)


# --- SQuAD agreement on ASCII English ------------------------------------------------------


@FAST
@given(squad_ascii_text(), squad_ascii_text())
def test_token_f1_matches_squad_v11_on_ascii(a: str, b: str) -> None:
    assert normalize(a) == squad_normalize_answer(a)
    if tokens(a) and tokens(b):
        assert token_f1(a, b) == pytest.approx(squad_f1_score(a, b), abs=1e-12)
    assert exact_match(a, b) == float(squad_exact_match_score(a, b))


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("Muslim people", "muslim people!", 1.0),
        ("the Black women", "women", 2 / 3),
        ("a cat sat on the mat", "cat on mat", 2 * 3 / (4 + 3)),
        ("women women men", "women men men", 2 * 2 / 6),  # multiset, not set
        ("Denver Broncos", "Carolina Panthers", 0.0),
        ("Saint Bernadette Soubirous", "Bernadette Soubirous", 0.8),
    ],
)
def test_token_f1_hand_computed(a: str, b: str, expected: float) -> None:
    assert token_f1(a, b) == pytest.approx(expected, abs=1e-15)
    assert token_f1(a, b) == pytest.approx(squad_f1_score(a, b), abs=1e-15)


def test_symbols_are_the_documented_difference_from_squad() -> None:
    # $ is a Unicode symbol (Sc), not punctuation: we keep it, SQuAD deletes it.
    assert squad_normalize_answer("$5") == "5"
    assert normalize("$5") == "$5"
    assert token_f1("$5", "5") == 0.0


# --- normalize ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("ＷＯＭＥＮ", "women"),  # full-width (NFKC)
        ("Straße", "strasse"),  # casefold, not lower
        ("“Women”", "women"),  # curly quotes are Pi/Pf
        ("don’t", "dont"),  # U+2019 deleted, like SQuAD's ASCII apostrophe
        ("U.S.", "us"),
        ("women—immigrants", "womenimmigrants"),  # em dash deleted, not a separator
        ("The  women\u3000of\u00a0the\tcity", "women of city"),  # ideographic + nbsp spaces
        ("ﬁre", "fire"),  # ligature (NFKC)
        ("e\u0301", "\u00e9"),  # combining accent composed
        ("¿Qué?", "qué"),
        ("  An apple ", "apple"),
        ("theory of anna", "theory of anna"),  # articles only as whole tokens
        ("A", ""),
        ("!!!", ""),
        ("", ""),
        ("   \t\n", ""),
    ],
)
def test_normalize_cases(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


def test_normalize_none_is_empty() -> None:
    assert normalize(None) == ""


def test_arabic_text() -> None:
    # Arabic comma (U+060C) and question mark (U+061F) are punctuation; words stay tokens.
    assert tokens("المسلمين، اليهود؟") == ["المسلمين", "اليهود"]
    # Presentation form lam-alef ligature folds to the two base letters under NFKC.
    assert normalize("\ufefb") == "\u0644\u0627"
    # Harakat are kept (documented: no Arabic-specific folding).
    assert normalize("مُسلم") != normalize("مسلم")
    assert token_f1("النساء المسلمات", "المسلمات") == pytest.approx(2 / 3)


def test_cjk_characters_are_tokens() -> None:
    assert tokens("中国人") == ["中", "国", "人"]
    assert tokens("hello中国world") == ["hello", "中", "国", "world"]
    assert tokens("日本の女性") == ["日", "本", "の", "女", "性"]
    assert tokens("한국 사람") == ["한", "국", "사", "람"]
    assert tokens("女性，移民。") == ["女", "性", "移", "民"]  # full-width and ideographic punct.
    assert tokens("ｶﾀｶﾅ") == ["カ", "タ", "カ", "ナ"]  # half-width katakana via NFKC
    assert tokens("a中") == ["a", "中"]  # "a" was not a whole whitespace token
    assert token_f1("中国女性", "女性") == pytest.approx(2 * 2 / 6)
    # exact_match compares normalized strings, token_f1 token multisets.
    assert exact_match("中国", "中 国") == 0.0
    assert token_f1("中国", "中 国") == 1.0


def test_absence_rules() -> None:
    absent = [None, "", "   ", "\u3000", "the", "!!!", " a , an "]
    for x in absent:
        assert is_absent(x)
        for y in absent:
            assert token_f1(x, y) == 1.0
            assert exact_match(x, y) == 1.0
        assert token_f1(x, "women") == 0.0
        assert token_f1("women", x) == 0.0
        assert exact_match(x, "women") == 0.0
    assert not is_absent("women")


def test_non_string_raises() -> None:
    with pytest.raises(TypeError):
        token_f1(5, "a")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        normalize(["women"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        token_f1_batch([b"x"], ["x"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        exact_match_batch([3], [3])  # type: ignore[list-item]


# --- properties ---------------------------------------------------------------------------


@FAST
@given(optional_mixed_text, optional_mixed_text)
def test_token_f1_symmetric_and_bounded(a: str | None, b: str | None) -> None:
    f = token_f1(a, b)
    assert f == token_f1(b, a)
    assert 0.0 <= f <= 1.0
    assert exact_match(a, b) == exact_match(b, a)
    if exact_match(a, b) == 1.0:
        assert f == 1.0


@FAST
@given(optional_mixed_text)
def test_identity(a: str | None) -> None:
    assert token_f1(a, a) == 1.0
    assert exact_match(a, a) == 1.0
    assert normalize(normalize(a)) == normalize(a)  # idempotent


@FAST
@given(mixed_text)
def test_tokens_are_normalized_pieces(a: str) -> None:
    toks = tokens(a)
    assert "".join(toks) == normalize(a).replace(" ", "")
    assert all(t and " " not in t for t in toks)


# --- batch forms ------------------------------------------------------------------------


@FAST
@given(st.lists(st.tuples(optional_mixed_text, optional_mixed_text), max_size=25))
def test_batches_equal_scalar(pairs: list[tuple[str | None, str | None]]) -> None:
    a = [p[0] for p in pairs]
    # Reuse some strings so the memo and the identical-pair short-cut are exercised.
    b = [p[1] if i % 3 else p[0] for i, p in enumerate(pairs)]
    f = token_f1_batch(a, b)
    e = exact_match_batch(a, b)
    assert f.dtype == np.float64 and f.shape == (len(a),)
    assert f.tolist() == [token_f1(x, y) for x, y in zip(a, b)]
    assert e.tolist() == [exact_match(x, y) for x, y in zip(a, b)]


def test_batch_empty_and_length_mismatch() -> None:
    assert token_f1_batch([], []).shape == (0,)
    assert exact_match_batch([], []).shape == (0,)
    with pytest.raises(ValueError):
        token_f1_batch(["a"], [])
    with pytest.raises(ValueError):
        exact_match_batch(["a"], [])
