"""The study's stratified draw: proportional allocation by largest remainder with at least one
item per non-empty stratum when the size allows (quality.sampling.allocate), else plain largest
remainder; then a seeded shuffle inside each stratum. The same strata, size and seed always
give the same sample, whatever order the items were listed in."""

from __future__ import annotations

import math
import random

from quality.sampling import allocate


def allocation(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Items per stratum, summing to ``min(n, population)``. With fewer items asked than non-empty
    strata the "one each" floor cannot hold: the largest quotas (then the larger strata, then the
    key) get one each."""
    strata = sorted(k for k, v in sizes.items() if v > 0)
    total = sum(sizes[k] for k in strata)
    n = min(max(int(n), 0), total)
    if n == 0:
        return dict.fromkeys(strata, 0)
    if n >= len(strata):
        return allocate({k: sizes[k] for k in strata}, n)
    quota = {k: n * sizes[k] / total for k in strata}
    alloc = {k: math.floor(quota[k]) for k in strata}
    # Ties as in quality.sampling.allocate: the larger stratum, then the later key.
    order = sorted(strata, key=lambda k: (quota[k] - alloc[k], sizes[k], k), reverse=True)
    for k in order[: n - sum(alloc.values())]:
        alloc[k] += 1
    return alloc


def draw(strata: dict[str, list[int]], n: int, seed: int) -> dict[str, list[int]]:
    """{stratum: sorted item ids drawn}; a per-stratum RNG seeded by (seed, stratum)."""
    alloc = allocation({k: len(v) for k, v in strata.items()}, n)
    out = {}
    for key, count in alloc.items():
        ids = sorted(strata[key])
        random.Random(f"independence:{seed}:{key}").shuffle(ids)
        out[key] = sorted(ids[:count])
    return out
