"""Confidence intervals for a proportion (pure: no Django).

The Wilson score interval (Wilson 1927) is the one to report for a share such as "98.0% of
references fully or partially compatible": unlike the normal approximation it stays inside
[0, 1] and keeps its coverage when the share is near 0 or 1 and n is small (150 items).
"""

from __future__ import annotations

import math
from statistics import NormalDist


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float] | None:
    """(low, high) of the Wilson score interval for ``k`` successes in ``n`` trials; None when
    n is 0 (no share to bound). Raises ValueError for impossible counts or levels."""
    if isinstance(k, bool) or isinstance(n, bool) or int(k) != k or int(n) != n:
        raise ValueError("k and n must be whole numbers")
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if not 0 < level < 1:
        raise ValueError("level must be between 0 and 1")
    if n == 0:
        return None
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def share(k: int, n: int, level: float = 0.95, digits: int = 4) -> dict:
    """{k, n, share, ci} with the share and its Wilson interval rounded to ``digits``; share and
    ci are None when n is 0."""
    ci = wilson_interval(k, n, level)
    return {
        "k": int(k),
        "n": int(n),
        "share": round(k / n, digits) if n else None,
        "ci": [round(ci[0], digits), round(ci[1], digits)] if ci else None,
    }
