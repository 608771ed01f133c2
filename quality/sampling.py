"""Stratified sampling for the candidate-blind audit (Meme3W Appendix A.2: "200 cases sampled
to cover all four target categories and different textual and visual grounding conditions").

Proportional allocation with at least one item per non-empty stratum (largest remainder
method), then a seeded draw inside each stratum. Pure functions: the same strata, n and seed
always give the same sample, whatever the order the strata or items were listed in.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable


class SamplingError(ValueError):
    """n cannot be honoured (larger than the population, or fewer than the non-empty strata)."""


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Items to draw per stratum: sums to n, >= 1 per non-empty stratum, <= its size,
    otherwise proportional to stratum size (Hamilton / largest remainder)."""
    strata = sorted(k for k, v in sizes.items() if v > 0)
    total = sum(sizes[k] for k in strata)
    if n > total:
        raise SamplingError(f"n = {n} is larger than the {total} items that can be sampled")
    if n < len(strata):
        raise SamplingError(f"n = {n} is smaller than the {len(strata)} non-empty strata (each needs one item)")
    quota = {k: n * sizes[k] / total for k in strata}
    alloc = {k: min(sizes[k], max(1, math.floor(quota[k]))) for k in strata}
    # Too many (the "at least one" floor pushed small strata up): take back from the strata most
    # above their quota. Too few: give to the largest remainders that still have room.
    while sum(alloc.values()) > n:
        k = max((k for k in strata if alloc[k] > 1), key=lambda k: (alloc[k] - quota[k], k))
        alloc[k] -= 1
    while sum(alloc.values()) < n:
        k = max((k for k in strata if alloc[k] < sizes[k]), key=lambda k: (quota[k] - alloc[k], sizes[k], k))
        alloc[k] += 1
    return alloc


def stratified_sample(
    strata: dict[str, list[int]], n: int, seed: int, prefer: Callable[[int], bool] | None = None
) -> dict[str, list[int]]:
    """Draw ``allocate(...)`` items from each stratum with a per-stratum RNG seeded by
    ``(seed, stratum)``. ``prefer(item)`` False pushes an item behind the others of its stratum
    (used for items no auditor may audit): it is taken only when the stratum needs it."""
    alloc = allocate({k: len(v) for k, v in strata.items()}, n)
    out = {}
    for key, count in alloc.items():
        ids = sorted(strata[key])
        random.Random(f"{seed}:{key}").shuffle(ids)
        if prefer is not None:
            ids = [i for i in ids if prefer(i)] + [i for i in ids if not prefer(i)]
        out[key] = sorted(ids[:count])
    return out
