"""Stratified, group-level train/val/test assignment and its integrity check. No Django.

Meme3W ("Dataset Construction", Appendix A.3 "Split integrity"): exact duplicates are removed
before splitting, verified near-duplicate groups go to one split, splits are 85/5/10; AHA-Memes
("Splits") stratifies by the label. Here a *group* is a connected component of the graph whose
edges are the near-duplicate pairs judged "same" or not yet reviewed (lib.hamming's
connected components) plus the exact-duplicate links; a group is the unit that gets a split.

Determinism: the only inputs are arrays built from the data and a per-item order key that the
caller derives from the project's seed and a stable item key, so the same data and seed give the
same assignment on any machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lib.hamming import connected_groups

SPLITS = ("train", "val", "test")
SPLIT_CODE = {name: code for code, name in enumerate(SPLITS)}
DEFAULT_RATIOS = (0.85, 0.05, 0.10)
UNASSIGNED = -1


def check_ratios(ratios) -> tuple[float, float, float]:
    """Three non-negative numbers with a positive sum, normalized to sum 1."""
    if ratios in (None, [], ()):
        return DEFAULT_RATIOS
    try:
        values = [float(r) for r in ratios]
    except (TypeError, ValueError):
        raise ValueError(f"split ratios must be three numbers, got {ratios!r}") from None
    if len(values) != 3 or any(not np.isfinite(v) or v < 0 for v in values) or sum(values) <= 0:
        raise ValueError(f"split ratios must be three non-negative numbers [train, val, test], got {ratios!r}")
    total = sum(values)
    return tuple(v / total for v in values)  # type: ignore[return-value]


def exact_duplicate_groups(pixel_hashes) -> dict[str, list[int]]:
    """Indices sharing a pixel hash, for every hash that occurs more than once.

    Keys are in order of first occurrence and each list ascends, so ``indices[0]`` is the copy
    to keep and the others are the exact duplicates to remove before splitting. O(n) in a dict.
    """
    seen: dict[str, list[int]] = {}
    for index, value in enumerate(pixel_hashes):
        seen.setdefault(value, []).append(index)
    return {value: indices for value, indices in seen.items() if len(indices) > 1}


def group_ids(n_nodes: int, edges: np.ndarray) -> np.ndarray:
    """Group id (smallest node index) per node; ``edges`` is (k, 2) node indices."""
    return connected_groups(n_nodes, edges)


def stratified_group_split(
    *,
    groups: np.ndarray,
    strata: np.ndarray,
    order_keys: np.ndarray,
    ratios=DEFAULT_RATIOS,
) -> np.ndarray:
    """Split code (0 train, 1 val, 2 test) per item.

    ``groups[i]``: group label of item i (any integers; items sharing a label share a split).
    ``strata[i]``: stratum code of item i; a group takes the stratum of its first member (its
    smallest index), so that strata stay exact for the singletons that make up most data.
    ``order_keys[i]``: seeded pseudo-random key; a group's key is its first member's.

    Within each stratum the groups are visited in key order and each goes to the split whose
    item count is furthest below its target share of the items placed so far, including the
    group (largest deficit first, ties to train, then val, then test). This is the
    largest-remainder apportionment done online: every prefix of the order is within one group
    of the ratios, so small strata still reach val and test and sizes track the ratios closely.
    """
    ratios = np.asarray(check_ratios(ratios), dtype=np.float64)
    n = len(groups)
    out = np.full(n, UNASSIGNED, dtype=np.int8)
    if n == 0:
        return out
    _, first_index, group_of = np.unique(groups, return_index=True, return_inverse=True)
    group_of = group_of.reshape(-1)
    sizes = np.bincount(group_of)
    g_stratum = strata[first_index]
    g_key = order_keys[first_index]
    # Visit order: by stratum, then by seeded key (ties, practically impossible, by position).
    order = np.lexsort((first_index, g_key, g_stratum))
    g_split = np.empty(len(sizes), dtype=np.int8)
    # Plain Python floats in the loop: ~10x faster than numpy on 3-element arrays (1M groups ~1 s).
    r0, r1, r2 = (float(r) for r in ratios)
    stratum_list, size_list = g_stratum.tolist(), sizes.tolist()
    choices = []
    c0 = c1 = c2 = placed = 0.0
    current = None
    for g in order.tolist():
        if stratum_list[g] != current:
            current = stratum_list[g]
            c0 = c1 = c2 = placed = 0.0
        size = size_list[g]
        placed += size
        d0, d1, d2 = r0 * placed - c0, r1 * placed - c1, r2 * placed - c2
        # First maximum wins: ties go to train, then val, then test.
        if d0 >= d1 and d0 >= d2:
            choices.append(0)
            c0 += size
        elif d1 >= d2:
            choices.append(1)
            c1 += size
        else:
            choices.append(2)
            c2 += size
    g_split[order] = np.asarray(choices, dtype=np.int8)
    out[:] = g_split[group_of]
    return out


@dataclass
class IntegrityReport:
    """Proof (or counter-examples) that no pixel hash and no near-duplicate group spans splits."""

    ok: bool
    items_checked: int
    pixel_hashes_checked: int
    exact_duplicates_in_release: int
    pixel_hashes_across_splits: list = field(default_factory=list)
    groups_checked: int = 0
    multi_member_groups: int = 0
    groups_across_splits: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "items_checked": self.items_checked,
            "pixel_hashes_checked": self.pixel_hashes_checked,
            "exact_duplicates_in_release": self.exact_duplicates_in_release,
            "pixel_hashes_across_splits": self.pixel_hashes_across_splits,
            "groups_checked": self.groups_checked,
            "multi_member_groups": self.multi_member_groups,
            "groups_across_splits": self.groups_across_splits,
        }


def integrity_check(
    *,
    node_ids: np.ndarray,
    released: np.ndarray,
    splits: np.ndarray,
    pixel_keys: np.ndarray,
    edges: np.ndarray,
    examples: int = 20,
) -> IntegrityReport:
    """Check an assignment from scratch, without trusting how it was made.

    ``node_ids``: every item id of the project, ascending. ``released``: bool per node (in the
    release). ``splits``: split code per node (ignored where not released). ``pixel_keys``:
    uint64 per node, the first 64 bits of the pixel sha256 (two different images sharing them
    would only raise a false alarm, never hide a leak). ``edges``: (k, 2) node *indices* of
    every link that must not be cut: same/unreviewed near-duplicate pairs and exact-duplicate
    links, also through items that are not released.

    Returns counter-examples as item ids: pixel hashes present in more than one split, and
    groups (components of ``edges``) whose released members are in more than one split.
    """
    idx = np.flatnonzero(released)
    sp = splits[idx].astype(np.int64)
    keys = pixel_keys[idx]
    uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    in_release_dups = int((counts - 1).sum())
    across: list = []
    if len(idx):
        lo = np.full(len(uniq), 3, dtype=np.int64)
        hi = np.full(len(uniq), -1, dtype=np.int64)
        np.minimum.at(lo, inverse, sp)
        np.maximum.at(hi, inverse, sp)
        bad = np.flatnonzero(lo != hi)
        for b in bad[:examples].tolist():
            members = idx[inverse == b]
            across.append(
                {"item_ids": node_ids[members].tolist(), "splits": sorted({SPLITS[s] for s in splits[members]})}
            )
    comp = connected_groups(len(node_ids), edges) if len(node_ids) else np.zeros(0, dtype=np.int64)
    rel_comp = comp[idx]
    g_uniq, g_inv, g_counts = np.unique(rel_comp, return_inverse=True, return_counts=True)
    g_inv = g_inv.reshape(-1)
    group_across: list = []
    n_bad_groups = 0
    if len(idx):
        glo = np.full(len(g_uniq), 3, dtype=np.int64)
        ghi = np.full(len(g_uniq), -1, dtype=np.int64)
        np.minimum.at(glo, g_inv, sp)
        np.maximum.at(ghi, g_inv, sp)
        gbad = np.flatnonzero(glo != ghi)
        n_bad_groups = len(gbad)
        for b in gbad[:examples].tolist():
            members = idx[g_inv == b]
            group_across.append(
                {"item_ids": node_ids[members].tolist(), "splits": sorted({SPLITS[s] for s in splits[members]})}
            )
    n_bad_pixels = int((lo != hi).sum()) if len(idx) else 0
    return IntegrityReport(
        ok=n_bad_pixels == 0 and n_bad_groups == 0 and in_release_dups == 0,
        items_checked=len(idx),
        pixel_hashes_checked=len(uniq),
        exact_duplicates_in_release=in_release_dups,
        pixel_hashes_across_splits=across,
        groups_checked=len(g_uniq),
        multi_member_groups=int((g_counts > 1).sum()),
        groups_across_splits=group_across,
    )
