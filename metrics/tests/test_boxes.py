from __future__ import annotations

from itertools import permutations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment
from shapely.geometry import box as shapely_box
from shapely.ops import unary_union

from metrics.boxes import (
    bipartite_match,
    enclosing,
    enclosing_batch,
    enclosing_iou,
    enclosing_iou_batch,
    iou,
    iou_batch,
    set_iou,
)
from metrics.tests.strategies import FAST, SLOW, float_box, grid_box, int_box, region

# --- references ---------------------------------------------------------------------------


def shapely_set_iou(a: list[list[float]], b: list[list[float]]) -> float:
    ua = unary_union([shapely_box(*x) for x in a])
    ub = unary_union([shapely_box(*x) for x in b])
    return ua.intersection(ub).area / ua.union(ub).area


def lsa_bipartite(a: list[list[float]], b: list[list[float]], tau: float) -> bool:
    if len(a) != len(b):
        return False
    if not a:
        return True
    m = np.array([[iou(x, y) for y in b] for x in a])
    rows, cols = linear_sum_assignment(m, maximize=True)
    return bool((m[rows, cols] >= tau).all())


def brute_force_bipartite(a: list[list[float]], b: list[list[float]], tau: float) -> bool:
    """Every permutation: is some total-IoU-maximizing assignment all >= tau?"""
    if len(a) != len(b):
        return False
    if not a:
        return True
    m = [[iou(x, y) for y in b] for x in a]
    totals = [(sum(m[i][p[i]] for i in range(len(a))), p) for p in permutations(range(len(b)))]
    best = max(t for t, _ in totals)
    return any(t >= best - 1e-12 and all(m[i][p[i]] >= tau for i in range(len(a))) for t, p in totals)


# --- iou ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([0, 0, 10, 10], [0, 0, 10, 10], 1.0),
        ([0, 0, 10, 10], [20, 20, 30, 30], 0.0),
        ([0, 0, 10, 10], [10, 0, 20, 10], 0.0),  # touching edge
        ([0, 0, 10, 10], [5, 0, 15, 10], 50 / 150),
        ([0, 0, 10, 10], [2, 2, 8, 8], 36 / 100),  # containment
        ([0.5, 0.5, 1.5, 1.5], [1.0, 1.0, 2.0, 2.0], 0.25 / 1.75),  # continuous, no +1
    ],
)
def test_iou_hand_computed(a: list[float], b: list[float], expected: float) -> None:
    assert iou(a, b) == pytest.approx(expected, abs=1e-15)
    assert iou(b, a) == pytest.approx(expected, abs=1e-15)


def test_degenerate_boxes() -> None:
    point = [5, 5, 5, 5]
    line = [0, 5, 10, 5]
    assert iou(point, point) == 1.0  # identical zero-area boxes agree
    assert iou(line, line) == 1.0
    assert iou(point, line) == 0.0
    assert iou(point, [0, 0, 10, 10]) == 0.0  # zero area inside a real box
    inverted = [10, 10, 0, 0]  # not re-ordered: zero area
    assert iou(inverted, [0, 0, 10, 10]) == 0.0
    assert enclosing_iou([point], [point]) == 1.0
    assert set_iou([point], [point]) == 1.0
    assert set_iou([point], [line]) == 0.0
    assert set_iou([point, [0, 0, 10, 10]], [[0, 0, 10, 10]]) == 1.0  # adds no area
    assert bipartite_match([point], [point], 0.5)


def test_invalid_boxes_raise() -> None:
    for bad in ([0, 0, 1], [0, 0, 1, 2, 3], [0, 0, float("nan"), 1], [0, 0, float("inf"), 1], "0011"):
        with pytest.raises(ValueError):
            iou(bad, [0, 0, 1, 1])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        enclosing_iou([[0, 0, 1]], [[0, 0, 1, 1]])
    with pytest.raises(ValueError):
        enclosing_batch([[[0, 0, 1]]])
    with pytest.raises(ValueError):
        enclosing_batch([[[0, 0, float("nan"), 1]]])
    with pytest.raises(ValueError):
        iou_batch(np.zeros((2, 4)), np.zeros((3, 4)))
    with pytest.raises(ValueError):
        iou_batch(np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(ValueError):
        enclosing_iou_batch([[], []], [[]])


@FAST
@given(float_box(), float_box())
def test_iou_properties(a: list[float], b: list[float]) -> None:
    v = iou(a, b)
    assert v == iou(b, a)
    assert 0.0 <= v <= 1.0
    assert iou(a, a) == 1.0


# --- enclosing -----------------------------------------------------------------------------


def test_enclosing() -> None:
    assert enclosing([]) is None
    assert enclosing(None) is None
    assert enclosing([[10, 20, 30, 40], [0, 25, 15, 50]]) == [0.0, 20.0, 30.0, 50.0]
    assert enclosing([[1, 2, 3, 4], [1, 2, 3, 4]]) == [1.0, 2.0, 3.0, 4.0]  # duplicates


def test_enclosing_iou_rules() -> None:
    assert enclosing_iou([], []) == 1.0
    assert enclosing_iou(None, []) == 1.0
    assert enclosing_iou([], [[0, 0, 1, 1]]) == 0.0
    assert enclosing_iou([[0, 0, 1, 1]], None) == 0.0
    # two boxes vs one box covering both: enclosing rectangles are identical
    assert enclosing_iou([[0, 0, 10, 10], [90, 90, 100, 100]], [[0, 0, 100, 100]]) == 1.0
    assert enclosing_iou([[0, 0, 10, 10]], [[0, 0, 10, 20]]) == 0.5


@FAST
@given(region(int_box()), region(int_box()), st.randoms(use_true_random=False))
def test_region_metrics_invariant_to_box_order(a: list, b: list, rnd) -> None:
    a2 = a[:]
    rnd.shuffle(a2)
    b2 = b + b[:1]  # a duplicated box changes neither enclosing nor union
    rnd.shuffle(b2)
    assert enclosing_iou(a, b) == enclosing_iou(a2, b2) == enclosing_iou(b2, a2)
    assert set_iou(a, b) == pytest.approx(set_iou(a2, b2), abs=1e-15)
    assert set_iou(a, b) == pytest.approx(set_iou(b, a), abs=1e-15)
    assert bipartite_match(a, b, 0.5) == bipartite_match(a2, b[:], 0.5) == bipartite_match(b, a2, 0.5)
    for metric in (enclosing_iou, set_iou):
        assert 0.0 <= metric(a, b) <= 1.0
        assert metric(a, a) == 1.0


# --- bipartite -----------------------------------------------------------------------------


def test_bipartite_rules() -> None:
    b = [0, 0, 10, 10]
    assert bipartite_match([], [], 0.5)
    assert not bipartite_match([], [b], 0.5)
    assert not bipartite_match([b, b], [b], 0.5)  # duplicates count
    assert bipartite_match([b, b], [b, b], 1.0)
    # order-crossed boxes are matched by assignment, not by position
    c = [50, 50, 60, 60]
    assert bipartite_match([b, c], [c, b], 0.99)
    # one pair below tau fails the whole record
    assert not bipartite_match([b, c], [b, [55, 50, 65, 60]], 0.5)
    assert bipartite_match([b, c], [b, [55, 50, 65, 60]], 0.3)


def test_bipartite_tied_optima_do_not_depend_on_the_solver() -> None:
    # IoU matrix [[0.5, 0.25], [0.25, 0.0]]: both assignments total 0.5. scipy returns the
    # diagonal (a 0.0 pair); the crossed one has every pair >= 0.2, so the rule holds.
    a = [[2, 2, 4, 4], [0, 3, 3, 4]]
    b = [[2, 3, 4, 4], [2, 0, 4, 3]]
    assert not lsa_bipartite(a, b, 0.2)
    assert bipartite_match(a, b, 0.2)
    assert bipartite_match(b, a, 0.2)
    assert not bipartite_match(a, b, 0.3)


@FAST
@given(region(float_box(), 4), region(float_box(), 4), st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.75]))
def test_bipartite_matches_linear_sum_assignment(a: list, b: list, tau: float) -> None:
    # Continuous coordinates: ties in total IoU between different assignments have
    # probability zero, so scipy's single optimum is the reference.
    if len(b) > len(a):
        b = b[: len(a)]
    elif len(a) > len(b) and b:
        a = a[: len(b)]
    assert bipartite_match(a, b, tau) == lsa_bipartite(a, b, tau)


@FAST
@given(region(grid_box(), 4), region(grid_box(), 4), st.sampled_from([0.2, 1 / 3, 0.5, 0.75]))
def test_bipartite_matches_brute_force_with_ties(a: list, b: list, tau: float) -> None:
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    assert bipartite_match(a, b, tau) == brute_force_bipartite(a, b, tau)


# --- set IoU -------------------------------------------------------------------------------


def test_set_iou_hand_computed() -> None:
    assert set_iou([], []) == 1.0
    assert set_iou([[0, 0, 1, 1]], []) == 0.0
    assert set_iou([[0, 0, 10, 10], [5, 5, 15, 15]], [[0, 0, 10, 10]]) == pytest.approx(100 / 175)
    # disjoint boxes far apart: union-based, unlike enclosing-rectangle IoU
    a = [[0, 0, 10, 10], [90, 90, 100, 100]]
    b = [[0, 0, 100, 100]]
    assert set_iou(a, b) == pytest.approx(200 / 10000)
    assert enclosing_iou(a, b) == 1.0


@FAST
@given(region(int_box(), 5).filter(bool), region(int_box(), 5).filter(bool))
def test_set_iou_matches_shapely(a: list, b: list) -> None:
    assert set_iou(a, b) == pytest.approx(shapely_set_iou(a, b), rel=1e-9, abs=1e-12)


@SLOW
@given(region(float_box(), 4).filter(bool), region(float_box(), 4).filter(bool))
def test_set_iou_matches_shapely_float(a: list, b: list) -> None:
    assert set_iou(a, b) == pytest.approx(shapely_set_iou(a, b), rel=1e-9, abs=1e-12)


@FAST
@given(float_box(), float_box())
def test_set_iou_of_single_boxes_is_iou(a: list, b: list) -> None:
    assert set_iou([a], [b]) == pytest.approx(iou(a, b), rel=1e-12, abs=1e-15)


# --- batch forms ---------------------------------------------------------------------------


@FAST
@given(st.lists(st.tuples(st.one_of(float_box(), grid_box()), st.one_of(float_box(), grid_box())), max_size=30))
def test_iou_batch_equals_scalar(pairs: list) -> None:
    a = [p[0] for p in pairs] + [[5, 5, 5, 5], [1, 1, 1, 1], [3, 3, 1, 1]]
    b = [p[1] for p in pairs] + [[5, 5, 5, 5], [2, 2, 2, 2], [3, 3, 1, 1]]
    out = iou_batch(np.array(a, dtype=float), np.array(b, dtype=float))
    assert out.tolist() == [iou(x, y) for x, y in zip(a, b)]  # bit-identical


@FAST
@given(st.lists(st.tuples(st.one_of(st.none(), region(int_box(), 3)), region(float_box(), 3)), max_size=30))
def test_enclosing_iou_batch_equals_scalar(pairs: list) -> None:
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    out = enclosing_iou_batch(a, b)
    assert out.tolist() == [enclosing_iou(x, y) for x, y in zip(a, b)]
    ea = enclosing_batch(a)
    for row, r in zip(ea, a):
        e = enclosing(r)
        assert np.isnan(row).all() if e is None else row.tolist() == e
    # precomputed rectangles give the same answer
    assert enclosing_iou_batch(ea, enclosing_batch(b)).tolist() == out.tolist()


def test_batch_empty_inputs() -> None:
    assert enclosing_batch([]).shape == (0, 4)
    assert enclosing_iou_batch([], []).shape == (0,)
    assert enclosing_iou_batch([[], None], [[], []]).tolist() == [1.0, 1.0]
    assert iou_batch(np.zeros((0, 4)), np.zeros((0, 4))).shape == (0,)
