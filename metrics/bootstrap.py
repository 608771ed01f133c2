"""Percentile bootstrap confidence intervals (Meme3W Table 15, Appendix B.5; SPEC section 3).

"Confidence intervals are percentile intervals from 10,000 paired bootstrap resamples of test
instances [...] applying the same resampled indices to both systems in each comparison."

Both functions draw ``n`` resamples of the N instances with replacement from
``numpy.random.default_rng(seed)``, take the mean of each resample and return the
``(1 - level)/2`` and ``(1 + level)/2`` percentiles (``numpy.percentile``, linear
interpolation). Results are deterministic for a given seed and input. The work is vectorized
in chunks of about 4M drawn numbers (~32 MB), so memory stays bounded whatever N and n are;
time is O(n * N), or O(n * distinct values) when the scores take few values (see
:func:`bootstrap_means`).

Input rules: scores are real numbers (bools are fine: 1.0/0.0 per-record correctness); empty
input, NaN/inf, ``None`` or unequal lengths raise ``ValueError``; ``n >= 1`` and
``0 < level < 1``. With a single instance, or all instances equal, the interval collapses to
the point estimate.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["paired_ci", "mean_ci", "bootstrap_means", "resample_indices", "percentile_interval"]

_CHUNK_ELEMENTS = 1 << 22
_MIN_REPEATS_FOR_MULTINOMIAL = 8


def _as_scores(x: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be real numbers") from exc
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _check(n: int, level: float) -> None:
    if int(n) != n or n < 1:
        raise ValueError("n (number of resamples) must be a positive integer")
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")


def bootstrap_means(x: Sequence[float] | np.ndarray, n: int = 10000, seed: int = 0) -> np.ndarray:
    """Means of ``n`` resamples (with replacement) of the instances ``x`` -> float64[n].

    Two exact ways to draw the same thing, picked from the data alone (so the result stays a
    function of ``(x, n, seed)``):

    * values repeat (on average 8+ times: 0/1 correctness, per-item F1 of short spans, IoU
      shares): the mean of a resample only depends on how often each distinct value is
      drawn, which is one multinomial draw over the distinct values with their frequencies.
      O(n * distinct values) instead of O(n * N): 10,000 resamples of 1M 0/1 scores take
      well under a second.
    * otherwise: draw an (rows x N) index matrix per chunk and average. O(n * N): fine for
      evaluation sets (438 items: ~50 ms), slow for millions of continuous scores.
    """
    values = _as_scores(x, "scores")
    _check(n, 0.5)
    rng = np.random.default_rng(seed)
    size, n = values.size, int(n)
    means = np.empty(n)
    distinct, counts = np.unique(values, return_counts=True)
    if distinct.size * _MIN_REPEATS_FOR_MULTINOMIAL <= size:
        pvals = counts / size
        # Offsets from the smallest value: a constant input gives exactly that constant.
        offsets = distinct - distinct[0]
        chunk = max(1, _CHUNK_ELEMENTS // distinct.size)
        for start in range(0, n, chunk):
            rows = min(chunk, n - start)
            draws = rng.multinomial(size, pvals, size=rows)
            means[start : start + rows] = distinct[0] + (draws @ offsets) / size
        return means
    chunk = max(1, _CHUNK_ELEMENTS // size)
    for start in range(0, n, chunk):
        rows = min(chunk, n - start)
        idx = rng.integers(0, size, size=(rows, size))
        means[start : start + rows] = values[idx].mean(axis=1)
    return means


def _interval(means: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1.0 - level) / 2.0
    low, high = np.percentile(means, [100.0 * alpha, 100.0 * (1.0 - alpha)])
    return float(low), float(high)


def paired_ci(
    scores_a: Sequence[float] | np.ndarray,
    scores_b: Sequence[float] | np.ndarray,
    n: int = 10000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Paired percentile bootstrap CI of ``mean(a) - mean(b)`` -> ``(low, high)``.

    ``scores_a[i]`` and ``scores_b[i]`` are two systems' scores on the same instance i (e.g.
    :func:`metrics.records.jra_scores` of two models on the same gold records); each resample
    draws instances, keeping pairs together, so it is computed as the bootstrap of the
    per-instance differences ``a[i] - b[i]`` (same distribution, half the work). Paper: Table 15 (HarmTrace vs GRPO, +3.42,
    [0.23, 6.85] on 438 gold-harmful test memes).
    """
    a = _as_scores(scores_a, "scores_a")
    b = _as_scores(scores_b, "scores_b")
    if a.size != b.size:
        raise ValueError(f"paired scores differ in length: {a.size} != {b.size}")
    _check(n, level)
    return _interval(bootstrap_means(a - b, n=n, seed=seed), level)


def mean_ci(
    scores: Sequence[float] | np.ndarray, n: int = 10000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap CI of ``mean(scores)`` over resampled instances -> ``(low, high)``.

    For the agreement report ("every figure carries n and a bootstrap 95% CI", SPEC section 3):
    pass the per-item scores (per-item F1, 0/1 for "IoU >= 0.75", ...). For kappa, which is
    not a mean of per-item scores, use :func:`metrics.agreement.kappa_ci`.
    """
    _check(n, level)
    return _interval(bootstrap_means(scores, n=n, seed=seed), level)


def resample_indices(n_items: int, n: int = 1000, seed: int = 0) -> Iterator[np.ndarray]:
    """The item resamples of every report bootstrap: ``n`` arrays of ``n_items`` indices.

    Resample r is the r-th call ``rng.integers(0, n_items, size=n_items)`` on one
    ``numpy.random.default_rng(seed)`` -- the stream ``quality.compute.bootstrap_statistic``
    has always drawn, so a statistic recomputed on ``data[idx]`` for these ``idx`` and the
    weighted-sum bootstrap of :mod:`metrics.resample` (whose weight matrix is
    ``bincount(idx)`` of the same draws) see the same resamples. One call per resample, never
    one ``(n, n_items)`` draw: numpy's bounded-integer generator buffers 32-bit halves within
    a call, so a single big draw is not the same stream when ``n_items`` is odd.
    """
    if int(n_items) != n_items or n_items < 1:
        raise ValueError("n_items must be a positive integer")
    _check(n, 0.5)
    rng = np.random.default_rng(seed)
    for _ in range(int(n)):
        yield rng.integers(0, int(n_items), size=int(n_items))


def percentile_interval(values: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, float] | None:
    """``(low, high)`` percentiles ``(1 - level)/2`` and ``(1 + level)/2`` of the finite values.

    ``numpy.percentile`` with linear interpolation, like every CI in this package. NaN and
    infinite values (resamples where the statistic is undefined) are dropped first; None
    when nothing is left.
    """
    _check(1, level)
    arr = np.asarray(values, dtype=np.float64).ravel()
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return None
    return _interval(arr, level)
