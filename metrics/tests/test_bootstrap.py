from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from metrics.bootstrap import bootstrap_means, mean_ci, paired_ci


def naive_percentile_ci(x: np.ndarray, n: int, seed: int, level: float = 0.95) -> tuple[float, float]:
    """Textbook loop: resample indices, average, take percentiles."""
    rng = np.random.default_rng(seed)
    means = [x[rng.integers(0, len(x), len(x))].mean() for _ in range(n)]
    tail = (1 - level) / 2
    low, high = np.percentile(means, [100 * tail, 100 * (1 - tail)])
    return float(low), float(high)


def test_constant_difference_collapses() -> None:
    a = np.full(50, 0.7)
    b = np.full(50, 0.2)
    low, high = paired_ci(a, b, n=500)
    assert low == pytest.approx(0.5, abs=1e-15) and high == pytest.approx(0.5, abs=1e-15)
    assert mean_ci([0.1] * 30, n=200) == (0.1, 0.1)
    assert mean_ci([3.0], n=10) == (3.0, 3.0)


def test_deterministic_for_a_seed() -> None:
    rng = np.random.default_rng(0)
    a = (rng.random(438) < 0.52).astype(float)
    b = (rng.random(438) < 0.49).astype(float)
    assert paired_ci(a, b, seed=3) == paired_ci(a, b, seed=3)
    assert paired_ci(a, b, seed=3) != paired_ci(a, b, seed=4)
    x = rng.random(300)  # continuous: index-resampling path
    assert mean_ci(x, seed=1) == mean_ci(x.tolist(), seed=1)
    assert mean_ci(x, seed=1) != mean_ci(x, seed=2)


@pytest.mark.parametrize("kind", ["binary", "continuous"])
def test_paired_ci_matches_naive_and_scipy(kind: str) -> None:
    rng = np.random.default_rng(1)
    if kind == "binary":  # per-record JRA correctness, Table 15 setting (438 memes)
        a = (rng.random(438) < 0.525).astype(float)
        b = np.where(rng.random(438) < 0.85, a, 1 - a)
    else:
        a = rng.random(400)
        b = a + rng.normal(0.03, 0.1, 400)
    low, high = paired_ci(a, b, n=10000, seed=0)
    d = a - b
    assert low < d.mean() < high
    ref_low, ref_high = naive_percentile_ci(d, 4000, seed=9)
    assert low == pytest.approx(ref_low, abs=0.006)
    assert high == pytest.approx(ref_high, abs=0.006)
    res = stats.bootstrap(
        (a, b),
        lambda x, y, axis=-1: x.mean(axis=axis) - y.mean(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=4000,
        method="percentile",
        random_state=np.random.default_rng(5),
    )
    assert low == pytest.approx(res.confidence_interval.low, abs=0.006)
    assert high == pytest.approx(res.confidence_interval.high, abs=0.006)


def test_pairing_matters() -> None:
    # Strongly correlated systems: the paired interval is much narrower than the interval of
    # an unpaired comparison would be.
    rng = np.random.default_rng(2)
    a = (rng.random(500) < 0.5).astype(float)
    b = np.where(rng.random(500) < 0.95, a, 1 - a)
    low, high = paired_ci(a, b)
    (la, ha), (lb, hb) = mean_ci(a, seed=1), mean_ci(b, seed=2)
    assert (high - low) < 0.5 * ((ha - la) + (hb - lb)) / 2


def test_width_follows_normal_theory_for_large_n() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(0.0, 1.0, 20000)
    low, high = mean_ci(x, n=2000, seed=0)
    se = x.std(ddof=1) / np.sqrt(x.size)
    assert (high - low) == pytest.approx(2 * 1.959964 * se, rel=0.08)
    bits = (rng.random(200000) < 0.3).astype(float)  # multinomial path, 200k items
    low, high = mean_ci(bits, n=10000, seed=0)
    se = bits.std(ddof=1) / np.sqrt(bits.size)
    assert (high - low) == pytest.approx(2 * 1.959964 * se, rel=0.05)


def test_levels_nest() -> None:
    rng = np.random.default_rng(4)
    x = rng.random(100)
    l90, h90 = mean_ci(x, level=0.90)
    l99, h99 = mean_ci(x, level=0.99)
    assert l99 < l90 < h90 < h99


def test_bootstrap_means_shapes_and_chunks() -> None:
    x = np.arange(10.0)  # distinct values == N: index path
    assert bootstrap_means(x, n=7).shape == (7,)
    big = np.random.default_rng(0).random(2_000_000)  # chunk of 2 rows per draw
    m = bootstrap_means(big, n=5, seed=0)
    assert m.shape == (5,) and np.all(np.abs(m - big.mean()) < 0.002)
    bits = np.array([0.0, 1.0] * 50)
    assert np.all((bootstrap_means(bits, n=3000) >= 0) & (bootstrap_means(bits, n=3000) <= 1))


def test_errors() -> None:
    with pytest.raises(ValueError):
        paired_ci([], [])
    with pytest.raises(ValueError):
        paired_ci([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        paired_ci([1.0, float("nan")], [1.0, 2.0])
    with pytest.raises(ValueError):
        mean_ci([1.0, None])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        mean_ci([1.0], n=0)
    with pytest.raises(ValueError):
        mean_ci([1.0], level=1.0)
    with pytest.raises(ValueError):
        mean_ci([[1.0, 2.0]])
