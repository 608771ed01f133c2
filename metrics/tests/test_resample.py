"""metrics.resample: the weighted-sum bootstrap equals the straightforward recompute.

For every statistic, each resample's value from ``W @ contributions`` is compared with the
metrics.agreement function recomputed on ``data[idx]`` for the same ``idx`` (to 1e-12, and
the same resamples undefined), hence the same percentile CI; point estimates are compared
with scikit-learn, the krippendorff package and the plain metrics functions.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from itertools import combinations

import krippendorff
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from metrics import resample as rs
from metrics.agreement import cohen_kappa, macro_pairwise_kappa, mean_pairwise_kappa, pairwise_kappas
from metrics.bootstrap import percentile_interval, resample_indices
from metrics.tests import recompute
from metrics.tests.strategies import FAST, SLOW

CATS = ["x", "y", "z", None]
LABELS = ["Mocking", "Slurs", "Contempt", "Other"]


def check_against_recompute(
    contrib: rs.Contributions,
    recompute_one: Callable[[np.ndarray], float],
    n_items: int,
    *,
    resamples: int = 40,
    seed: int = 0,
    block: int = 7,
    chunk: int = 5,
) -> rs.Estimate:
    """Per resample, CI, point estimate and dropped count against the recompute."""
    est = rs.bootstrap_figures({"f": contrib}, n=resamples, seed=seed, block=block, chunk=chunk)["f"]
    ref = np.array([recompute_one(idx) for idx in resample_indices(n_items, resamples, seed)])
    nan = np.isnan(ref)
    assert np.array_equal(nan, np.isnan(est.resampled))
    np.testing.assert_allclose(est.resampled[~nan], ref[~nan], rtol=0, atol=1e-12)
    assert est.undefined == int(nan.sum())
    point = recompute_one(np.arange(n_items))
    if math.isnan(point):
        assert est.value is None and est.ci is None
    else:
        assert est.value == pytest.approx(point, abs=1e-12)
        ref_ci = percentile_interval(ref)
        if ref_ci is None:
            assert est.ci is None
        else:
            assert est.ci == pytest.approx(ref_ci, abs=1e-12)
    return est


# --- strategies -------------------------------------------------------------------------------


@st.composite
def person_items(
    draw: st.DrawFn, values: list = CATS, pool: int = 5, max_raters: int = 3, max_items: int = 30
) -> list[dict]:
    """Items annotated by 1..max_raters distinct people of a pool (1 = contributes no pair)."""
    n = draw(st.integers(1, max_items))
    agree = draw(st.floats(0, 1))
    items = []
    for _ in range(n):
        k = draw(st.integers(1, max_raters))
        people = draw(st.permutations(range(pool)))[:k]
        base = draw(st.sampled_from(values))
        items.append({p: base if draw(st.floats(0, 1)) < agree else draw(st.sampled_from(values)) for p in people})
    return items


@st.composite
def person_label_items(draw: st.DrawFn, pool: int = 5, max_raters: int = 3, max_items: int = 25) -> list[dict]:
    n = draw(st.integers(1, max_items))
    items = []
    for _ in range(n):
        k = draw(st.integers(1, max_raters))
        people = draw(st.permutations(range(pool)))[:k]
        base = set(draw(st.lists(st.sampled_from(LABELS), max_size=2)))
        it = {}
        for p in people:
            r = draw(st.integers(0, 9))
            it[p] = None if r == 0 else base if r < 6 else set(draw(st.lists(st.sampled_from(LABELS), max_size=2)))
        items.append(it)
    return items


def subsets(n: int) -> st.SearchStrategy:
    return st.one_of(st.none(), st.lists(st.booleans(), min_size=n, max_size=n).map(np.array))


# --- the resamples --------------------------------------------------------------------------------


def test_resample_indices_is_the_quality_compute_stream() -> None:
    rng = np.random.default_rng(7)
    expected = [rng.integers(0, 11, size=11) for _ in range(5)]
    got = list(resample_indices(11, 5, 7))
    assert all(np.array_equal(a, b) for a, b in zip(expected, got))
    blocks = list(rs.resample_counts(11, 5, 7, block=2))
    assert [b.shape for b in blocks] == [(2, 11), (2, 11), (1, 11)]
    counts = np.vstack(blocks)
    assert np.array_equal(counts, np.array([np.bincount(i, minlength=11) for i in expected]))
    assert (counts.sum(axis=1) == 11).all()


def test_a_count_beyond_uint8_widens_the_block_and_keeps_every_count() -> None:
    out = np.zeros((2, 300), dtype=np.uint8)
    out = rs._count_into(out, 0, np.arange(300))
    assert out.dtype == np.uint8 and (out[0] == 1).all()
    drawn = np.array([7] * 299 + [3])  # 299 draws of one item: 299 wraps to 43 in uint8
    wide = rs._count_into(out, 1, drawn)
    assert wide.dtype == np.int64
    assert np.array_equal(wide[0], np.ones(300)) and wide[1, 7] == 299 and wide[1, 3] == 1 and wide[1].sum() == 300


def test_one_weight_matrix_for_all_figures() -> None:
    rng = np.random.default_rng(1)
    x = rng.random(60)
    mask = rng.random(60) < 0.5
    figs = {"a": rs.mean_contributions(x), "b": rs.mean_contributions(x, mask), "c": rs.share_contributions(x, 0.5)}
    together = rs.bootstrap_figures(figs, n=30, seed=4)
    for name, c in figs.items():
        alone = rs.bootstrap_figures({name: c}, n=30, seed=4, block=5, chunk=13)[name]
        np.testing.assert_allclose(alone.resampled, together[name].resampled, rtol=0, atol=1e-15)
    with pytest.raises(ValueError):
        rs.bootstrap_figures({"a": figs["a"], "d": rs.mean_contributions(x[:10])})
    assert rs.bootstrap_figures({}) == {}


# --- mean and share ---------------------------------------------------------------------------


@FAST
@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(
            st.lists(st.floats(0, 1, allow_nan=False), min_size=n, max_size=n).map(np.array), subsets(n)
        )
    )
)
def test_mean_and_share_equal_recompute(case: tuple) -> None:
    x, mask = case
    n = x.size
    check_against_recompute(rs.mean_contributions(x, mask), lambda i: recompute.mean(x, mask, i), n)
    check_against_recompute(rs.share_contributions(x, 0.7, mask), lambda i: recompute.share(x, 0.7, mask, i), n)


def test_mean_input_rules() -> None:
    x = np.array([0.5, np.nan, 1.0])
    mask = np.array([True, False, True])
    assert rs.mean_contributions(x, mask).point() == 0.75  # NaN outside the subset is ignored
    assert rs.mean_contributions(x, mask).n_items == 2
    with pytest.raises(ValueError):
        rs.mean_contributions(x)
    with pytest.raises(TypeError):
        rs.mean_contributions(x, [1, 0, 1])
    with pytest.raises(ValueError):
        rs.mean_contributions([0.1, 0.2], np.array([True]))
    # a subset of one item: resamples that miss it are undefined, dropped and counted
    one = np.zeros(20, dtype=bool)
    one[3] = True
    est = check_against_recompute(
        rs.mean_contributions(np.linspace(0, 1, 20), one),
        lambda i: recompute.mean(np.linspace(0, 1, 20), one, i),
        20,
        resamples=200,
    )
    assert 0 < est.undefined < 200 and est.ci == (3 / 19, 3 / 19)


# --- Cohen's kappa of two raters -----------------------------------------------------------------


@FAST
@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(
            st.lists(st.sampled_from(CATS), min_size=n, max_size=n),
            st.lists(st.sampled_from(CATS), min_size=n, max_size=n),
            st.floats(0, 1),
            subsets(n),
        )
    )
)
def test_kappa_equals_recompute(case: tuple) -> None:
    a, b, agree, mask = case
    b = [x if i < agree * len(a) else y for i, (x, y) in enumerate(zip(a, b))]
    check_against_recompute(rs.kappa_contributions(a, b, mask), lambda i: recompute.kappa(a, b, mask, i), len(a))


def test_kappa_point_matches_sklearn_and_undefined() -> None:
    rng = np.random.default_rng(3)
    a = rng.choice(["h", "n", "o"], 500).tolist()
    b = [v if rng.random() < 0.8 else str(rng.choice(["h", "n", "o"])) for v in a]
    assert rs.kappa_contributions(a, b).point() == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    # both raters constant on one category: undefined (sklearn: NaN)
    assert rs.kappa_contributions(["x"] * 5, ["x"] * 5).point() is None
    est = rs.bootstrap_figures({"k": rs.kappa_contributions(["x"] * 5, ["x"] * 5)}, n=10)["k"]
    assert est.value is None and est.ci is None and est.undefined == 10
    # one constant rater: defined, 0
    assert rs.kappa_contributions(["x"] * 4, ["x", "y", "x", "y"]).point() == 0.0


# --- kappa per annotator pair (people) -------------------------------------------------------------


@FAST
@given(person_items(max_raters=2))
def test_pairwise_kappa_two_raters_equals_recompute(items: list[dict]) -> None:
    ratings = rs.Ratings.from_items(items)
    check_against_recompute(
        rs.pairwise_kappa_contributions(ratings), lambda i: recompute.pairwise_kappa(items, None, i), len(items)
    )


@FAST
@given(person_items(max_raters=3).flatmap(lambda items: st.tuples(st.just(items), subsets(len(items)))))
def test_pairwise_kappa_three_raters_subset_equals_recompute(case: tuple) -> None:
    items, mask = case
    ratings = rs.Ratings.from_items(items)
    check_against_recompute(
        rs.pairwise_kappa_contributions(ratings, mask), lambda i: recompute.pairwise_kappa(items, mask, i), len(items)
    )


def test_pairwise_kappas_are_per_person_and_match_sklearn() -> None:
    rng = np.random.default_rng(5)
    items = []
    for _ in range(400):
        people = rng.choice(6, 3, replace=False).tolist()
        truth = str(rng.choice(["H", "N"]))
        items.append({p: truth if rng.random() < 0.85 else str(rng.choice(["H", "N"])) for p in people})
    per_pair = pairwise_kappas(items)
    assert list(per_pair) == sorted(per_pair) and len(per_pair) == 15
    for (p, q), k in per_pair.items():
        both = [it for it in items if p in it and q in it]
        assert k == pytest.approx(cohen_kappa_score([it[p] for it in both], [it[q] for it in both]), abs=1e-12)
    mean = float(np.mean(list(per_pair.values())))
    ratings = rs.Ratings.from_items(items)
    assert rs.pairwise_kappa_contributions(ratings).point() == pytest.approx(mean, abs=1e-12)
    assert rs.pair_ids(ratings) == list(per_pair)
    # Slot order is irrelevant: the same people in another submission order give the same value.
    shuffled = [dict(reversed(list(it.items()))) for it in items]
    assert rs.pairwise_kappa_contributions(rs.Ratings.from_items(shuffled)).point() == pytest.approx(mean, abs=1e-12)
    # ... while kappa by slot is a different statistic.
    slot_a = [next(iter(it.values())) for it in items]
    slot_b = [list(it.values())[1] for it in items]
    assert cohen_kappa(slot_a, slot_b) != pytest.approx(mean, abs=1e-6)


def test_pairwise_kappa_skips_undefined_pairs() -> None:
    # pair (0, 1) agrees on a constant category (undefined), pair (1, 2) is informative.
    items = [{0: "x", 1: "x"}, {0: "x", 1: "x"}, {1: "x", 2: "y"}, {1: "y", 2: "y"}, {1: "x", 2: "x"}, {3: "x"}]
    ref = cohen_kappa(["x", "y", "x"], ["y", "y", "x"])
    assert pairwise_kappas(items) == {(0, 1): None, (1, 2): ref}
    assert rs.pairwise_kappa_contributions(rs.Ratings.from_items(items)).point() == pytest.approx(ref, abs=1e-15)
    assert mean_pairwise_kappa([{0: "x"}, {1: "y"}]) is None
    assert rs.pairwise_kappa_contributions(rs.Ratings.from_items([{0: "x"}, {1: "y"}])).point() is None
    with pytest.raises(ValueError):
        rs.Ratings(np.array([[0, 0]]), np.array([[0, 1]]), (0,), ("x", "y"))


# --- macro kappa over (pair, label) ---------------------------------------------------------------


@FAST
@given(person_label_items().flatmap(lambda items: st.tuples(st.just(items), subsets(len(items)))))
def test_macro_label_kappa_equals_recompute(case: tuple) -> None:
    items, mask = case
    lr = rs.LabelRatings.from_items(items, LABELS)
    rows = lr.by_rater()
    check_against_recompute(
        rs.pairwise_label_kappa_contributions(lr, mask),
        lambda i: recompute.macro_label_kappa(rows, LABELS, mask, i),
        len(items),
    )


@FAST
@given(person_label_items().flatmap(lambda items: st.tuples(st.just(items), subsets(len(items)))))
def test_per_label_kappas_equal_macro_kappa_of_each_label(case: tuple) -> None:
    items, mask = case
    lr = rs.LabelRatings.from_items(items, LABELS)
    keep = [True] * len(items) if mask is None else list(mask)
    rows = rs.LabelRatings.from_items([it for it, m in zip(items, keep) if m], LABELS).by_rater()
    got = rs.per_label_kappas(rs.pairwise_label_kappa_contributions(lr, mask))
    for label, value in zip(lr.labels, got):
        want = macro_pairwise_kappa(rows, [label]) if len(rows) >= 2 else None
        assert (value is None and want is None) or value == pytest.approx(want, abs=1e-12), label


def test_per_label_kappas_refuses_other_contributions() -> None:
    with pytest.raises(ValueError, match="pairwise_label_kappa_contributions"):
        rs.per_label_kappas(rs.mean_contributions(np.ones(3), np.ones(3, dtype=bool)))


def test_macro_label_kappa_point_is_aha_rule() -> None:
    rng = np.random.default_rng(8)
    items = []
    for _ in range(300):
        people = rng.choice(5, 3, replace=False).tolist()
        truth = set(rng.choice(LABELS, rng.integers(0, 3), replace=False).tolist())
        items.append({p: truth if rng.random() < 0.8 else {str(rng.choice(LABELS))} for p in people})
    items[4][next(iter(items[4]))] = None  # first annotator of item 4  # a missing annotation
    lr = rs.LabelRatings.from_items(items, LABELS)
    # reference: sklearn per (pair, label) over items both annotated, macro over the defined ones
    values = []
    for p, q in combinations(range(5), 2):
        both = [it for it in items if it.get(p) is not None and it.get(q) is not None]
        for label in LABELS:
            xa = [int(label in it[p]) for it in both]
            xb = [int(label in it[q]) for it in both]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                k = cohen_kappa_score(xa, xb) if both else float("nan")
            if not math.isnan(k):
                values.append(k)
    point = rs.pairwise_label_kappa_contributions(lr).point()
    assert point == pytest.approx(float(np.mean(values)), abs=1e-12)
    assert point == pytest.approx(macro_pairwise_kappa(lr.by_rater(), LABELS), abs=1e-12)


# --- Krippendorff's alpha ---------------------------------------------------------------------------


def package_alpha(rows: list[list]) -> float | None:
    values = sorted({v for r in rows for v in r if v is not None}, key=repr)
    code = {v: float(i) for i, v in enumerate(values)}
    arr = np.array([[np.nan if v is None else code[v] for v in r] for r in rows], dtype=float)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = float(krippendorff.alpha(arr, level_of_measurement="nominal"))
    except ValueError:
        return None
    return None if math.isnan(a) else a


@FAST
@given(person_items(max_raters=3).flatmap(lambda items: st.tuples(st.just(items), subsets(len(items)))))
def test_alpha_equals_recompute_and_package(case: tuple) -> None:
    items, mask = case
    ratings = rs.Ratings.from_items(items)
    rows = recompute.alpha_rows(ratings)
    c = rs.alpha_contributions(ratings, mask)
    check_against_recompute(c, lambda i: recompute.alpha(rows, mask, i), len(items))
    keep = np.ones(len(items), dtype=bool) if mask is None else mask
    ref = package_alpha([[v for v, k in zip(r, keep) if k] for r in rows])
    assert (c.point() is None) if ref is None else c.point() == pytest.approx(ref, abs=1e-12)


@SLOW
@given(person_label_items(max_raters=4).flatmap(lambda items: st.tuples(st.just(items), subsets(len(items)))))
def test_label_alpha_equals_recompute(case: tuple) -> None:
    items, mask = case
    lr = rs.LabelRatings.from_items(items, LABELS)
    rows = lr.by_rater()
    check_against_recompute(
        rs.label_alpha_contributions(lr, mask), lambda i: recompute.label_alpha(rows, LABELS, mask, i), len(items)
    )


def test_alpha_package_example() -> None:
    # krippendorff's docstring example (3 coders, 15 units, missing values): 0.691358
    data = [
        [None, None, None, None, None, 3, 4, 1, 2, 1, 1, 3, 3, None, 3],
        [1, None, 2, 1, 3, 3, 4, 3, None, None, None, None, None, None, None],
        [None, None, 2, 1, 3, 4, 4, None, 2, 1, 1, 3, 3, None, 4],
    ]
    items = [{r: data[r][u] for r in range(3) if data[r][u] is not None} for u in range(15)]
    assert rs.alpha_contributions(rs.Ratings.from_items(items)).point() == pytest.approx(0.691358, abs=1e-6)


# --- blocks, chunks, float32 exactness, scale -------------------------------------------------------


def test_blocks_chunks_and_precision_paths_agree() -> None:
    rng = np.random.default_rng(11)
    n = 3000
    people = np.array([rng.choice(8, 3, replace=False) for _ in range(n)])
    codes = rng.integers(0, 3, (n, 3))
    ratings = rs.Ratings(people, codes, tuple(range(8)), ("a", "b", "c"))
    x = rng.random(n)
    figs = {
        "k": rs.pairwise_kappa_contributions(ratings),
        "a": rs.alpha_contributions(ratings),
        "m": rs.mean_contributions(x),
    }
    base = rs.bootstrap_figures(figs, n=20, seed=2)
    other = rs.bootstrap_figures(figs, n=20, seed=2, block=3, chunk=257)
    for name in figs:
        np.testing.assert_allclose(other[name].resampled, base[name].resampled, rtol=0, atol=1e-13)
    # integral contributions too large for exact float32 (max x n >= 2**24) go through float64
    big = rs.Contributions(sp.csr_matrix(figs["k"].matrix * 10_000.0), figs["k"].statistic, n)
    exact32, exact64 = rs._column_split(big.matrix, n)
    assert not exact32.any() and exact64.all()
    scaled = rs.bootstrap_figures({"k": big}, n=20, seed=2)["k"]
    np.testing.assert_allclose(scaled.resampled, base["k"].resampled, rtol=0, atol=1e-12)


def test_large_input_equals_recompute_on_a_few_resamples() -> None:
    # > one chunk (16,384 items) with default block and chunk sizes: the float32 sparse path.
    rng = np.random.default_rng(12)
    n = 20_000
    people = np.column_stack([rng.integers(0, 10, n), rng.integers(0, 10, n)])
    people[:, 1] = np.where(people[:, 1] == people[:, 0], (people[:, 0] + 1) % 10, people[:, 1])
    truth = rng.integers(0, 2, n)
    codes = np.where(rng.random((n, 2)) < 0.9, truth[:, None], 1 - truth[:, None])
    ratings = rs.Ratings(people, codes, tuple(range(10)), ("H", "N"))
    items = [dict(zip(p.tolist(), c.tolist())) for p, c in zip(people, codes)]
    check_against_recompute(
        rs.pairwise_kappa_contributions(ratings),
        lambda i: recompute.pairwise_kappa(items, None, i),
        n,
        resamples=4,
        block=32,
        chunk=16384,
    )


def test_ratings_from_items_validation() -> None:
    r = rs.Ratings.from_items([{1: "x", 2: None}, [(2, "y")]])
    assert r.rater_ids == (1, 2) and r.categories == ("x", None, "y")
    assert r.by_rater() == [["x", None], [None, "y"]]
    with pytest.raises(ValueError):
        rs.Ratings.from_items([[(1, "x"), (1, "y")]])
    lr = rs.LabelRatings.from_items([{1: {"a", "zz"}, 2: None}, {2: "a", 1: set()}], ["a", "b"])
    assert lr.by_rater() == [[frozenset({"a"}), frozenset()], [None, frozenset({"a"})]]
    with pytest.raises(TypeError):
        rs.LabelRatings.from_items([], "ab")
    with pytest.raises(ValueError):
        rs.LabelRatings.from_items([{1: {"a"}}], [])


def _random_slots(rng: np.random.Generator, n: int, width: int, n_values: int, holes: bool):
    """(raters, codes) with empty slots, holes between rated slots (``holes``) and raters
    that are arbitrary non-negative ids (not 0..k-1)."""
    raters = np.full((n, width), -1)
    codes = np.full((n, width), 99)  # ignored where the slot is empty
    for i in range(n):
        k = int(rng.integers(0, width + 1))
        slots = sorted(rng.choice(width, k, replace=False).tolist()) if holes else list(range(k))
        for s, person in zip(slots, rng.choice(9, k, replace=False).tolist()):
            raters[i, s] = 7 * person + 3
            codes[i, s] = int(rng.integers(0, n_values))
    return raters, codes


@pytest.mark.parametrize("holes", [False, True])
def test_ratings_from_codes_equal_from_items(holes: bool) -> None:
    """The array constructors give the arrays of the per-item ones: same rater order, same
    categories in first-seen order (equal values merged: 1 and True are one category), same
    slots, on hostile data (empty items, one rater, missing label sets, bare labels, labels
    outside the field)."""
    rng = np.random.default_rng(5)
    values = ["a", "b", None, "a", "c", 1, True, ("t",)]
    label_values = [frozenset({"x"}), None, frozenset(), ["x", "y"], "y", frozenset({"z", "x"}), None, ("q",)]
    for _ in range(200):
        n, width = int(rng.integers(0, 10)), int(rng.integers(0, 5))
        raters, codes = _random_slots(rng, n, width, len(values), holes)
        rated = [[(int(raters[i, s]), int(codes[i, s])) for s in range(width) if raters[i, s] >= 0] for i in range(n)]
        slow = rs.Ratings.from_items([[(r, values[c]) for r, c in row] for row in rated])
        fast = rs.Ratings.from_codes(raters, codes, values)
        assert (fast.rater_ids, fast.categories) == (slow.rater_ids, slow.categories)
        assert np.array_equal(fast.raters, slow.raters) and np.array_equal(fast.codes, slow.codes)
        slow_l = rs.LabelRatings.from_items([[(r, label_values[c]) for r, c in row] for row in rated], ["x", "y", "q"])
        fast_l = rs.LabelRatings.from_codes(raters, codes, label_values, ["x", "y", "q"])
        assert (fast_l.rater_ids, fast_l.labels) == (slow_l.rater_ids, slow_l.labels)
        assert np.array_equal(fast_l.raters, slow_l.raters) and np.array_equal(fast_l.members, slow_l.members)
    with pytest.raises(ValueError):
        rs.Ratings.from_codes(np.array([[4, 4]]), np.array([[0, 1]]), ["x", "y"])
    with pytest.raises(TypeError):
        rs.LabelRatings.from_codes(np.zeros((1, 1), dtype=int), np.zeros((1, 1), dtype=int), [{"a"}], "ab")


def test_columns_are_the_matrix_read_in_place() -> None:
    """Dense contributions given as columns (bool masks, uint8 hits, float64 scores; one mask
    shared by several figures) give the figures of the same contributions as a float64 matrix,
    per resample, over chunks, blocks and both precisions; columns are never copied."""
    rng = np.random.default_rng(21)
    n = 2500
    mask = rng.random(n) < 0.7
    x = np.round(rng.random(n), 3)
    hits = (rng.random(n) < 0.4).astype(float)
    figs = {
        "mean": rs.mean_contributions(x, mask),
        "share": rs.mean_contributions(hits, mask),
        "hit": rs.share_contributions(x, 0.5, mask),
    }
    assert figs["share"].columns[0].dtype == np.uint8 and figs["mean"].columns[0].dtype == np.float64
    assert all(f.columns[1] is mask for f in figs.values())  # the caller's mask, shared
    dense = {k: rs.Contributions(f.matrix, f.statistic, f.n_items) for k, f in figs.items()}
    assert all(isinstance(d.matrix, np.ndarray) and d.matrix.dtype == np.float64 for d in dense.values())
    for kwargs in ({}, {"block": 3, "chunk": 257}, {"block": 5, "chunk": 5000}):
        got = rs.bootstrap_figures(figs, n=25, seed=4, **kwargs)
        want = rs.bootstrap_figures(dense, n=25, seed=4, **kwargs)
        for k in figs:
            np.testing.assert_allclose(got[k].resampled, want[k].resampled, rtol=0, atol=1e-13)
            assert got[k].value == pytest.approx(want[k].value, abs=1e-15)
    w = rng.integers(0, 3, n).astype(float)
    for k, f in figs.items():
        np.testing.assert_allclose(f.sums(w), dense[k].sums(w), rtol=0, atol=1e-12)
        np.testing.assert_allclose(f.sums(), dense[k].sums(), rtol=1e-15, atol=0)  # summation order
    with pytest.raises(ValueError, match="either"):
        rs.Contributions(np.zeros((3, 1)), rs.ratio_from_sums, 3, columns=[np.zeros(3)])
    with pytest.raises(ValueError, match="one length"):
        rs.Contributions(None, rs.ratio_from_sums, 3, columns=[np.zeros(3), np.zeros(4)])
    # A column the figure's recompute reads: the share of hits over the mask, checked exactly.
    check_against_recompute(
        figs["hit"],
        lambda i: float(np.mean((x[i] >= 0.5)[mask[i]])) if mask[i].any() else float("nan"),
        n,
        resamples=30,
        block=4,
        chunk=600,
    )


@pytest.mark.parametrize("bound", [1, 7, 5000, 1 << 20, 1 << 40])
def test_unique_inverse_is_numpy_unique(bound: int) -> None:
    rng = np.random.default_rng(bound % 97)
    for size in (0, 1, 3, 2000):
        keys = rng.integers(0, bound, size).astype(np.int64)
        got, inv = rs.unique_inverse(keys, bound)
        want, want_inv = np.unique(keys, return_inverse=True)
        assert got.dtype == want.dtype and np.array_equal(got, want) and np.array_equal(inv, want_inv)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_rater_kappa_from_codes_is_the_pairwise_kappa(seed: int) -> None:
    """The two-slot shortcut (quality.agreement, no Ratings) gives the figure of
    pairwise_kappa_contributions over Ratings.from_codes: point and every resample, with
    empty slots, a subset, equal values under two codes (one category) and None a category."""
    rng = np.random.default_rng(seed)
    n = 3000
    values = ["a", "b", None, "a", "c"]  # codes 0 and 3 are one category
    codes = rng.integers(0, len(values), (n, 2))
    codes[rng.random((n, 2)) < 0.05] = -1
    subset = rng.random(n) < 0.8
    slots = np.where(codes >= 0, np.arange(2)[None, :], -1)
    ref = rs.pairwise_kappa_contributions(rs.Ratings.from_codes(slots, codes, values), subset)
    got = rs.two_rater_kappa_contributions(codes[:, 0], codes[:, 1], values, subset)
    assert got.n_items == ref.n_items
    a = rs.bootstrap_figures({"k": got}, n=40, seed=3, block=7, chunk=500)["k"]
    b = rs.bootstrap_figures({"k": ref}, n=40, seed=3, block=7, chunk=500)["k"]
    assert a.value == pytest.approx(b.value, abs=1e-12)
    np.testing.assert_allclose(a.resampled, b.resampled, rtol=0, atol=1e-12)
    none = rs.two_rater_kappa_contributions(np.full(5, -1), np.full(5, -1), values)
    assert none.n_items == 0 and none.point() is None


def test_columns_over_some_rows_are_the_full_columns() -> None:
    """Contributions over some rows only (``rows``: a field scored on a third of the items)
    give the figures of the same contributions over every row, zero elsewhere: point, every
    resample (chunks with no row, blocks, both precisions, several figures and stacks at
    once, figures over equal rows given as separate arrays, rows that are every item),
    weighted sums and the matrix."""
    rng = np.random.default_rng(8)
    n = 3000
    rows = np.flatnonzero(rng.random(n) < 0.35).astype(np.int32)
    rows = rows[(rows < 700) | (rows > 1400)]  # whole chunks without a row
    x = np.round(rng.random(rows.size), 4)
    hits = (rng.random(rows.size) < 0.5).astype(float)
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    full_x, full_hits = np.zeros(n), np.zeros(n)
    full_x[rows], full_hits[rows] = x, hits
    ones = np.ones(rows.size, dtype=np.uint8)
    rows2 = np.flatnonzero(rng.random(n) < 0.6)
    mask2 = np.zeros(n, dtype=bool)
    mask2[rows2] = True
    other = rows.copy()  # equal rows, another array: one stack of weights
    figs = {
        "mean": rs.mean_contributions_at(x, rows, n, ones=ones),
        "share": rs.mean_contributions_at(hits, rows, n, ones=ones),
        "again": rs.mean_contributions_at(x * 2, other, n),
        "whole": rs.mean_contributions(rng.random(n)),  # a figure over every row beside them
        # rows that are every item: read with the full columns' weights, not gathered
        "everywhere": rs.mean_contributions_at(np.round(rng.random(n), 3), np.arange(n), n),
        # other rows beside them, both precisions: each row set's own weights
        "elsewhere": rs.mean_contributions_at(np.round(rng.random(rows2.size), 3), rows2, n),
        "elsewhere_hits": rs.mean_contributions_at((rng.random(rows2.size) < 0.3).astype(float), rows2, n),
    }
    full = {
        "mean": rs.mean_contributions(full_x, mask),
        "share": rs.mean_contributions(full_hits, mask),
        "again": rs.mean_contributions(full_x * 2, mask),
        "whole": figs["whole"],
        "everywhere": rs.mean_contributions(figs["everywhere"].columns[0]),
    }
    for k in ("elsewhere", "elsewhere_hits"):
        spread = np.zeros(n)
        spread[rows2] = figs[k].columns[0]
        full[k] = rs.mean_contributions(spread, mask2)
    assert figs["share"].columns[0].dtype == np.uint8 and figs["mean"].columns[1] is ones
    for k in figs:
        assert figs[k].shape == full[k].shape and figs[k].n_items == full[k].n_items
        np.testing.assert_array_equal(figs[k].matrix, full[k].matrix)
        assert figs[k].point() == pytest.approx(full[k].point(), abs=1e-14)
    w = rng.integers(0, 3, n).astype(float)
    for k in figs:
        np.testing.assert_allclose(figs[k].sums(w), full[k].sums(w), rtol=1e-14, atol=0)
    for kwargs in ({}, {"block": 3, "chunk": 257}, {"block": 5, "chunk": 5000}):
        got = rs.bootstrap_figures(figs, n=25, seed=4, **kwargs)
        want = rs.bootstrap_figures(full, n=25, seed=4, **kwargs)
        for k in figs:
            np.testing.assert_allclose(got[k].resampled, want[k].resampled, rtol=0, atol=1e-13)
    check_against_recompute(
        figs["mean"],
        lambda i: float(np.mean(full_x[i][mask[i]])) if mask[i].any() else float("nan"),
        n,
        resamples=20,
        block=4,
        chunk=600,
    )
    with pytest.raises(ValueError, match="increasing"):
        rs.Contributions(None, rs.ratio_from_sums, 2, columns=[np.ones(2)], rows=np.array([3, 1]), size=5)
    with pytest.raises(ValueError, match="increasing"):
        rs.Contributions(None, rs.ratio_from_sums, 2, columns=[np.ones(2)], rows=np.array([1, 5]), size=5)
    with pytest.raises(ValueError, match="one per value"):
        rs.Contributions(None, rs.ratio_from_sums, 2, columns=[np.ones(2)], rows=np.array([1]), size=5)
    with pytest.raises(ValueError, match="size"):
        rs.Contributions(None, rs.ratio_from_sums, 2, columns=[np.ones(2)], rows=np.array([1, 2]))
    with pytest.raises(ValueError, match="ones"):
        rs.mean_contributions_at(x, rows, n, ones=np.zeros(rows.size, dtype=np.uint8))
    with pytest.raises(ValueError, match="one entry per item"):
        figs["mean"].sums(np.ones(n - 1))


def test_exact_float32_split_of_sparse_matrices_needs_no_csc_copy() -> None:
    """The float32/float64 split of a sparse figure's columns reads its stored entries (CSR,
    CSC, integer data, duplicates summed first) and agrees with the dense rule."""
    dense = np.array([[1, 0, 0.5], [2, 0, 0], [0, 3, 0], [1, 0, 0]])
    for m in (sp.csr_matrix(dense), sp.csc_matrix(dense)):
        exact, inexact = rs._column_split(m, 4)
        assert exact.tolist() == [True, True, False] and inexact.tolist() == [False, False, True]
    ints = sp.csr_matrix(dense[:, :2].astype(np.uint8))
    assert rs._column_split(ints, 4)[0].tolist() == [True, True]
    # Two stored 0.5 entries at one cell are 1 once summed (integral); a lone 0.25 is not.
    dup = sp.csr_matrix((np.array([0.5, 0.5, 0.25]), np.array([0, 0, 1]), np.array([0, 2, 3])), shape=(2, 2))
    assert not dup.has_canonical_format
    assert rs._column_split(dup, 2)[0].tolist() == [True, False]
    big = sp.csr_matrix(np.array([[300.0], [1.0]]))
    assert rs._column_split(big, 1 << 16)[0].tolist() == [False]  # 300 * 65536 > 2**24


@pytest.mark.parametrize("top", [1, 3, 64, 65, 500])
def test_first_seen_codes_are_numpys_unique_in_first_occurrence_order(top):
    rng = np.random.default_rng(top)
    for n in (1, 7, 2000):
        codes = rng.integers(0, top, n)
        used, first = np.unique(codes, return_index=True)
        assert rs.first_seen(codes).tolist() == used[np.argsort(first, kind="stable")].tolist()
