"""The stratified draw (hand-computed allocations; determinism) and the Wilson interval."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from metrics.proportion import share, wilson_interval
from studies.sampling import allocation, draw


def test_allocation_is_proportional_by_largest_remainder_with_one_per_stratum():
    # quotas 5, 2.5, 0.5 -> floors 5, 2, 0 -> one-each floor lifts C to 1: 5 + 2 + 1 = 8
    assert allocation({"A": 10, "B": 5, "C": 1}, 8) == {"A": 5, "B": 2, "C": 1}
    # quotas 2.5, 1.25, 1.25 -> 2, 1, 1 = 4; the largest remainder (A, .5) gets the fifth
    assert allocation({"A": 6, "B": 3, "C": 3}, 5) == {"A": 3, "B": 1, "C": 1}
    # quotas 4.5, 4.5, 1.0 (n=10 of 20): a tie on the remainder -> the larger stratum, then the
    # later key (quality.sampling.allocate's rule): B gets it
    assert allocation({"A": 9, "B": 9, "C": 2}, 10) == {"A": 4, "B": 5, "C": 1}
    # quotas 2.55, 0.3, 0.15 (n=3): floors lifted to one each give 2 + 1 + 1 = 4 > 3; only a
    # stratum above one can give one back: A -> 1, 1, 1
    assert allocation({"A": 17, "B": 2, "C": 1}, 3) == {"A": 1, "B": 1, "C": 1}
    # the whole population
    assert allocation({"A": 3, "B": 1}, 10) == {"A": 3, "B": 1}
    # empty strata get nothing and do not count
    assert allocation({"A": 4, "B": 0}, 2) == {"A": 2}


def test_fewer_items_than_strata_drops_the_one_each_rule():
    # quotas 1.2, 0.6, 0.2 (n=2): floors 1, 0, 0; the largest remainder (B, .6) gets the other
    assert allocation({"A": 6, "B": 3, "C": 1}, 2) == {"A": 1, "B": 1, "C": 0}
    # quotas 0.5, 0.5, 0.5, 0.5 (n=2): all tie -> the later keys
    assert allocation({"A": 1, "B": 1, "C": 1, "D": 1}, 2) == {"A": 0, "B": 0, "C": 1, "D": 1}
    assert sum(allocation({str(i): 1 for i in range(9)}, 4).values()) == 4


def test_paper_size_sums_and_respects_strata():
    sizes = {"zh|ACG": 453, "zh|daily": 120, "zh|public": 195, "en|ACG": 175, "en|movies": 200, "en|cross": 110}
    alloc = allocation(sizes, 150)
    assert sum(alloc.values()) == 150 and all(v >= 1 for v in alloc.values())
    total = sum(sizes.values())
    assert all(abs(alloc[k] - 150 * sizes[k] / total) < 1 for k in sizes)


def test_draw_is_deterministic_for_a_seed_and_independent_of_listing_order():
    strata = {"A": list(range(40)), "B": list(range(100, 120)), "C": [500, 501]}
    a = draw(strata, 12, seed=7)
    b = draw({k: list(reversed(v)) for k, v in reversed(list(strata.items()))}, 12, seed=7)
    assert a == b
    assert {k: len(v) for k, v in a.items()} == allocation({"A": 40, "B": 20, "C": 2}, 12)
    assert all(set(a[k]) <= set(strata[k]) for k in a)
    others = [draw(strata, 12, seed=s) for s in range(1, 6)]
    assert any(o != a for o in others)  # another seed draws other items


def test_wilson_interval_against_hand_computed_and_scipy():
    # k=1, n=2: centre 0.5, half-width z/(1+z²/n)·sqrt(p(1-p)/n + z²/4n²) = 0.405469 (z = 1.959964)
    lo, hi = wilson_interval(1, 2)
    assert lo == pytest.approx(0.094531, abs=1e-6) and hi == pytest.approx(0.905469, abs=1e-6)
    for k, n in ((147, 150), (0, 10), (10, 10), (3, 7), (1, 1)):
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        got = wilson_interval(k, n)
        assert got == pytest.approx((ci.low, ci.high), abs=1e-9)
    assert wilson_interval(0, 0) is None
    assert share(147, 150) == {"k": 147, "n": 150, "share": 0.98, "ci": [0.9429, 0.9932]}
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
