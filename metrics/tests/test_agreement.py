from __future__ import annotations

import math
import warnings
from itertools import combinations

import krippendorff
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from metrics.agreement import (
    cohen_kappa,
    confusion_matrix,
    kappa_ci,
    kappa_from_confusion,
    krippendorff_alpha,
    macro_pairwise_kappa,
    per_label_kappa,
)
from metrics.tests.strategies import FAST, SLOW

CATS = ["group background", "religion and caste", "gender", "health condition", None]


def sk_kappa(a: list, b: list) -> float | None:
    """scikit-learn reference; None becomes a sentinel string (sklearn cannot sort None)."""
    sa = ["<none>" if x is None else x for x in a]
    sb = ["<none>" if x is None else x for x in b]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = cohen_kappa_score(sa, sb)
    return None if math.isnan(k) else k


@st.composite
def rater_pair(draw: st.DrawFn, labels: list = CATS, max_size: int = 60) -> tuple[list, list]:
    n = draw(st.integers(1, max_size))
    a = draw(st.lists(st.sampled_from(labels), min_size=n, max_size=n))
    agree = draw(st.floats(0, 1))
    b = [x if draw(st.floats(0, 1)) < agree else draw(st.sampled_from(labels)) for x in a]
    return a, b


# --- cohen_kappa -------------------------------------------------------------------------------


@FAST
@given(rater_pair())
def test_cohen_kappa_matches_sklearn(pair: tuple[list, list]) -> None:
    a, b = pair
    ours, ref = cohen_kappa(a, b), sk_kappa(a, b)
    if ref is None:
        assert ours is None
    else:
        assert ours == pytest.approx(ref, abs=1e-12)
        assert cohen_kappa(b, a) == pytest.approx(ours, abs=1e-12)
        assert -1.0 <= ours <= 1.0


def test_cohen_kappa_hand_cases() -> None:
    assert cohen_kappa(["x", "x", "y", "y"], ["x", "x", "y", "y"]) == 1.0
    assert cohen_kappa([], []) is None
    assert cohen_kappa(["x", "x"], ["x", "x"]) is None  # expected agreement 1
    assert cohen_kappa([None, None], [None, None]) is None
    # one rater constant, the other not: defined and 0 (sklearn agrees)
    assert cohen_kappa(["x", "x", "x", "x"], ["x", "y", "x", "y"]) == 0.0
    assert sk_kappa(["x", "x", "x", "x"], ["x", "y", "x", "y"]) == 0.0
    # None is a category: agreeing on "no category" counts as agreement
    assert cohen_kappa([None, "gender", None, "gender"], [None, "gender", None, "gender"]) == 1.0
    assert cohen_kappa([None, "gender"], ["gender", None]) == -1.0
    # a label seen by only one rater
    a, b = ["x", "x", "y", "y", "y"], ["x", "z", "y", "y", "x"]
    assert cohen_kappa(a, b) == pytest.approx(sk_kappa(a, b), abs=1e-12)
    # paper-style check: 2x2 table [[20, 5], [10, 15]] -> po 0.7, pe 0.5, kappa 0.4
    assert kappa_from_confusion([[20, 5], [10, 15]]) == pytest.approx(0.4, abs=1e-15)
    a = ["h"] * 25 + ["n"] * 25
    b = ["h"] * 20 + ["n"] * 5 + ["h"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4, abs=1e-15)


def test_cohen_kappa_errors() -> None:
    with pytest.raises(ValueError):
        cohen_kappa(["x"], [])
    with pytest.raises(TypeError):
        cohen_kappa([["x"]], [["x"]])  # unhashable labels
    with pytest.raises(ValueError):
        kappa_from_confusion([[1, 2, 3]])
    assert kappa_from_confusion([[0, 0], [0, 0]]) is None


def test_cohen_kappa_numpy_paths() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, 5000)
    b = np.where(rng.random(5000) < 0.7, a, rng.integers(0, 4, 5000))
    ref = cohen_kappa_score(a, b)
    assert cohen_kappa(a, b) == pytest.approx(ref, abs=1e-12)  # small non-negative codes
    assert cohen_kappa(a.astype(np.int8), b.astype(np.int8)) == pytest.approx(ref, abs=1e-12)
    assert cohen_kappa(a - 7, b - 7) == pytest.approx(ref, abs=1e-12)  # negative -> np.unique
    assert cohen_kappa(a * 10**9, b * 10**9) == pytest.approx(ref, abs=1e-12)  # large codes
    assert cohen_kappa(a.tolist(), b.tolist()) == pytest.approx(ref, abs=1e-12)
    assert cohen_kappa(a.astype(str), b.astype(str)) == pytest.approx(ref, abs=1e-12)
    ab, bb = a > 1, b > 1
    assert cohen_kappa(ab, bb) == pytest.approx(cohen_kappa_score(ab, bb), abs=1e-12)
    cm, cats = confusion_matrix(a.tolist(), b.tolist())
    assert cm.sum() == 5000 and sorted(cats) == [0, 1, 2, 3]


def test_cohen_kappa_many_categories_path() -> None:
    # > 1024 categories: the marginals-only path, still equal to sklearn.
    rng = np.random.default_rng(5)
    a = rng.integers(0, 3000, 20000)
    b = np.where(rng.random(20000) < 0.6, a, rng.integers(0, 3000, 20000))
    a_s, b_s = [f"e{x}" for x in a], [f"e{x}" for x in b]
    assert cohen_kappa(a_s, b_s) == pytest.approx(cohen_kappa_score(a_s, b_s), abs=1e-12)
    assert cohen_kappa(["a"] * 2000, ["a"] * 2000) is None
    big = [f"x{i}" for i in range(1500)]
    assert cohen_kappa(big, big) == 1.0


# --- kappa_ci ---------------------------------------------------------------------------------


def test_kappa_ci() -> None:
    rng = np.random.default_rng(11)
    a = rng.choice(["harmful", "non-harmful"], 400).tolist()
    b = [x if rng.random() < 0.85 else rng.choice(["harmful", "non-harmful"]) for x in a]
    k = cohen_kappa(a, b)
    low, high = kappa_ci(a, b, n=4000, seed=1)
    assert low < k < high
    assert kappa_ci(a, b, n=4000, seed=1) == (low, high)
    assert kappa_ci(a, b, n=4000, seed=2) != (low, high)
    # reference: explicit item resampling (different random stream, same distribution)
    # (cohen_kappa itself is checked against sklearn above; this checks the resampling).
    idx = np.random.default_rng(7).integers(0, 400, size=(4000, 400))
    aa = np.array([x == "harmful" for x in a], dtype=np.int8)
    bb = np.array([x == "harmful" for x in b], dtype=np.int8)
    ref = [k for k in (cohen_kappa(aa[i], bb[i]) for i in idx) if k is not None]
    ref_low, ref_high = np.percentile(ref, [2.5, 97.5])
    assert low == pytest.approx(ref_low, abs=0.015)
    assert high == pytest.approx(ref_high, abs=0.015)
    wide = kappa_ci(a[:100], b[:100], n=4000, seed=1)
    assert wide[1] - wide[0] > high - low
    assert kappa_ci(["x"] * 5, ["x"] * 5) is None
    with pytest.raises(ValueError):
        kappa_ci(a, b, level=1.0)


# --- per-label and macro pairwise kappa ---------------------------------------------------------

HATE_TYPES = ["Mocking", "Incitement", "Dehumanization", "Slurs", "Contempt", "Inferiority", "Exclusion", "Other"]


@st.composite
def label_sets(draw: st.DrawFn, n: int, labels: list[str]) -> list:
    return [
        None if draw(st.integers(0, 9)) == 0 else set(draw(st.lists(st.sampled_from(labels), max_size=3)))
        for _ in range(n)
    ]


def sk_per_label(a: list, b: list, labels: list) -> dict:
    keep = [i for i in range(len(a)) if a[i] is not None and b[i] is not None]
    out = {}
    for label in labels:
        xa = [int(label in a[i]) for i in keep]
        xb = [int(label in b[i]) for i in keep]
        out[label] = sk_kappa(xa, xb) if keep else None
    return out


@FAST
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(label_sets(n, HATE_TYPES[:5]), label_sets(n, HATE_TYPES[:5]))))
def test_per_label_kappa_matches_sklearn(pair: tuple[list, list]) -> None:
    a, b = pair
    ours = per_label_kappa(a, b, HATE_TYPES[:5])
    ref = sk_per_label(a, b, HATE_TYPES[:5])
    assert list(ours) == HATE_TYPES[:5]
    for label in HATE_TYPES[:5]:
        if ref[label] is None:
            assert ours[label] is None
        else:
            assert ours[label] == pytest.approx(ref[label], abs=1e-12)


def test_per_label_kappa_conventions() -> None:
    a = [{"Humor"}, {"Sarcasm"}, set(), None, {"Humor", "Other"}, "Humor"]
    b = [{"Humor"}, {"Humor"}, set(), {"Humor"}, {"Other"}, {"Humor", "Unknown"}]
    out = per_label_kappa(a, b, ["Humor", "Sarcasm", "Other", "Never"])
    # item 3 is missing for rater a -> skipped; set() kept as all-zero; "Unknown" ignored;
    # the bare string "Humor" is the one-label set {"Humor"}, not {"H","u",...}.
    keep_a = [{"Humor"}, {"Sarcasm"}, set(), {"Humor", "Other"}, {"Humor"}]
    keep_b = [{"Humor"}, {"Humor"}, set(), {"Other"}, {"Humor"}]
    expected = sk_per_label(keep_a, keep_b, ["Humor", "Sarcasm", "Other"])
    assert out["Humor"] == pytest.approx(expected["Humor"], abs=1e-12)
    assert out["Sarcasm"] == pytest.approx(expected["Sarcasm"], abs=1e-12)
    # The exclusive "Other" combined with Humor (invalid under AHA B.1.2) is scored as given:
    # both raters have Other on item 4 only -> perfect agreement on Other.
    assert out["Other"] == 1.0
    assert out["Never"] is None  # nobody used it: undefined, not 1.0
    with pytest.raises(ValueError):
        per_label_kappa([set()], [], ["x"])
    with pytest.raises(TypeError):
        per_label_kappa([set()], [set()], "Humor")
    assert per_label_kappa([], [], ["x"]) == {"x": None}


def test_macro_pairwise_kappa_aha_style() -> None:
    rng = np.random.default_rng(2)
    labels = ["Humor", "Sarcasm", "Other"]
    truth = [set(rng.choice(labels, size=rng.integers(1, 3), replace=False)) for _ in range(300)]
    ann = [[t if rng.random() < 0.8 else {str(rng.choice(labels))} for t in truth] for _ in range(3)]
    ann[2][5] = None  # one missing annotation
    ref_values = []
    for i, j in combinations(range(3), 2):
        ref_values += [v for v in sk_per_label(ann[i], ann[j], labels).values() if v is not None]
    assert macro_pairwise_kappa(ann, labels) == pytest.approx(float(np.mean(ref_values)), abs=1e-12)
    # two annotators: mean of per_label_kappa
    two = macro_pairwise_kappa(ann[:2], labels)
    assert two == pytest.approx(np.mean(list(per_label_kappa(ann[0], ann[1], labels).values())), abs=1e-12)
    # single-choice field (is_hateful) through the same API
    y = [["Hateful" if rng.random() < 0.4 else "Not-Hateful" for _ in range(200)]]
    y += [[v if rng.random() < 0.9 else "Hateful" for v in y[0]] for _ in range(2)]
    single = macro_pairwise_kappa(y, ["Hateful", "Not-Hateful"])
    ref = np.mean([sk_kappa(y[i], y[j]) for i, j in combinations(range(3), 2)])
    assert single == pytest.approx(ref, abs=1e-12)  # binary kappa is the same for both labels


def test_macro_pairwise_kappa_skips_undefined() -> None:
    a = [{"x"}, set(), {"x"}, set()]
    b = [{"x"}, set(), set(), set()]
    # label "y" never used -> undefined and skipped, not averaged in as 0 or 1
    assert macro_pairwise_kappa([a, b], ["x", "y"]) == pytest.approx(cohen_kappa([1, 0, 1, 0], [1, 0, 0, 0]))
    assert macro_pairwise_kappa([[set()], [set()]], ["x"]) is None
    with pytest.raises(ValueError):
        macro_pairwise_kappa([a], ["x"])
    with pytest.raises(ValueError):
        macro_pairwise_kappa([a, b[:2]], ["x"])


# --- Krippendorff's alpha ----------------------------------------------------------------------


def kripp_ref(data: list[list], level: str, value_domain=None) -> float | None:
    arr = np.array([[np.nan if v is None else v for v in r] for r in data], dtype=float)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = krippendorff.alpha(arr, level_of_measurement=level, value_domain=value_domain)
    except ValueError:
        return None
    return None if math.isnan(v) else float(v)


@st.composite
def reliability_data(draw: st.DrawFn, values: list) -> list[list]:
    m = draw(st.integers(2, 4))
    n = draw(st.integers(1, 25))
    base = draw(st.lists(st.sampled_from(values), min_size=n, max_size=n))
    rows = []
    for _ in range(m):
        row = []
        for x in base:
            r = draw(st.integers(0, 9))
            row.append(None if r == 0 else x if r < 7 else draw(st.sampled_from(values)))
        rows.append(row)
    return rows


@FAST
@given(reliability_data([1, 2, 3, 4, 5]), st.sampled_from(["nominal", "ordinal", "interval", "ratio"]))
def test_krippendorff_alpha_matches_package(data: list[list], level: str) -> None:
    ours = krippendorff_alpha(data, level)
    ref = kripp_ref(data, level)
    if ref is None:
        assert ours is None
    else:
        assert ours == pytest.approx(ref, abs=1e-12)


@SLOW
@given(reliability_data([0.0, 0.5, 2.25, 7.0, 10.5]), st.sampled_from(["interval", "ratio", "ordinal"]))
def test_krippendorff_alpha_float_values(data: list[list], level: str) -> None:
    ref = kripp_ref(data, level)
    ours = krippendorff_alpha(data, level)
    assert (ours is None) if ref is None else ours == pytest.approx(ref, abs=1e-12)


def test_krippendorff_alpha_package_examples() -> None:
    data = [
        [None, None, None, None, None, 3, 4, 1, 2, 1, 1, 3, 3, None, 3],
        [1, None, 2, 1, 3, 3, 4, 3, None, None, None, None, None, None, None],
        [None, None, 2, 1, 3, 4, 4, None, 2, 1, 1, 3, 3, None, 4],
    ]
    assert krippendorff_alpha(data) == pytest.approx(0.691358, abs=1e-6)
    assert krippendorff_alpha(data, "interval") == pytest.approx(0.810845, abs=1e-6)
    # string labels, nominal, and ordinal with an explicit order
    words = ["very low", "low", "mid", "high", "very high"]
    sdata = [[None if v is None else words[v - 1] for v in r] for r in data]
    assert krippendorff_alpha(sdata) == pytest.approx(krippendorff_alpha(data), abs=1e-12)
    ref = krippendorff.alpha(
        np.array([[np.nan if v is None else v for v in r] for r in sdata], dtype=object).astype(str),
        level_of_measurement="ordinal",
        value_domain=words,
    )
    assert krippendorff_alpha(sdata, "ordinal", value_domain=words) == pytest.approx(ref, abs=1e-12)
    # numpy input with NaN for missing
    arr = np.array([[np.nan if v is None else v for v in r] for r in data], dtype=float)
    assert krippendorff_alpha(arr) == pytest.approx(0.691358, abs=1e-6)


def test_krippendorff_alpha_undefined_and_errors() -> None:
    assert krippendorff_alpha([["a", "a"], ["a", "a"]]) is None  # one value
    assert krippendorff_alpha([["a", None], [None, "b"]]) is None  # nothing pairable
    assert krippendorff_alpha([["a", "b", None], ["a", "b", "c"]]) == 1.0  # "c" unpairable
    assert krippendorff_alpha([[None, "x"], [None, "y"]]) == kripp_ref([[None, 0], [None, 1]], "nominal") == 0.0
    with pytest.raises(ValueError):
        krippendorff_alpha([[1, 2]], "nominal")
    with pytest.raises(ValueError):
        krippendorff_alpha([[1, 2], [1]], "nominal")
    with pytest.raises(ValueError):
        krippendorff_alpha([[1, 2], [1, 2]], "cosine")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        krippendorff_alpha([["a", "b"], ["a", "b"]], "interval")
    with pytest.raises(TypeError):
        krippendorff_alpha([["a", 1], ["a", 1]], "ordinal")
    with pytest.raises(ValueError):
        krippendorff_alpha([["a", "b"], ["a", "z"]], "ordinal", value_domain=["a", "b"])


def test_krippendorff_alpha_two_raters_close_to_kappa() -> None:
    # Sanity link between the two statistics: for two raters, nominal alpha and kappa agree
    # to O(1/n) (alpha uses pooled marginals and an n-1 correction).
    rng = np.random.default_rng(4)
    a = rng.choice(["x", "y", "z"], 2000).tolist()
    b = [v if rng.random() < 0.8 else str(rng.choice(["x", "y", "z"])) for v in a]
    assert krippendorff_alpha([a, b]) == pytest.approx(cohen_kappa(a, b), abs=5e-3)


@FAST
@given(reliability_data([1, 2, 3, 4, 5]), st.sampled_from(["nominal", "ordinal", "interval", "ratio"]))
def test_krippendorff_alpha_numeric_array_path(data: list[list], level: str) -> None:
    # A float ndarray with NaN for missing takes the vectorized encoding; same value as lists.
    arr = np.array([[np.nan if v is None else v for v in r] for r in data], dtype=float)
    ours, ref = krippendorff_alpha(arr, level), krippendorff_alpha(data, level)
    assert (ours is None) if ref is None else ours == pytest.approx(ref, abs=1e-12)
    ints = np.array([[0 if v is None else v for v in r] for r in data])  # no missing, int dtype
    ref_int = kripp_ref(ints.tolist(), level)
    got_int = krippendorff_alpha(ints, level)
    assert (got_int is None) if ref_int is None else got_int == pytest.approx(ref_int, abs=1e-12)
