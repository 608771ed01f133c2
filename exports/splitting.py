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


def largest_remainder(total: int, ratios, *, at_least_one: bool = True) -> list[int]:
    """Integer sizes summing to ``total`` proportional to ``ratios`` (Hamilton's method: floors,
    then the leftover units to the largest fractional parts, ties to train, then val, then test).

    With ``at_least_one`` a split with a positive ratio gets at least one item whenever there
    are enough items for every such split (35 at 85/5/10 -> 30/2/3; 10 -> 8/1/1): the unit is
    taken from the largest split, so no asked-for split is ever silently empty.
    """
    weight = sum(float(r) for r in ratios) or 1.0
    quotas = [total * float(r) / weight for r in ratios]
    sizes = [int(q) for q in quotas]
    order = sorted(range(len(quotas)), key=lambda j: (-(quotas[j] - sizes[j]), j))
    for j in order[: total - sum(sizes)]:
        sizes[j] += 1
    positive = [j for j, r in enumerate(ratios) if r > 0]
    if at_least_one and total >= len(positive):
        for j in positive:
            if sizes[j] == 0:
                donor = max(range(len(sizes)), key=lambda k: (sizes[k], -k))
                sizes[donor] -= 1
                sizes[j] += 1
    return sizes


def _stratum_targets(stratum_sizes: list[int], totals: list[int], ratios) -> list[list[int]]:
    """Per stratum, per split, an item count: row sums are the strata sizes, column sums the
    global ``totals`` (controlled rounding of ``size * ratio``: floors, then the leftover units
    to the cells with the largest fractional parts where both the row and the column still
    need one, then any column still short)."""
    total = sum(stratum_sizes)
    if total == 0:
        return [[0, 0, 0] for _ in stratum_sizes]
    shares = [t / total for t in totals]  # the global targets' shares (pins and minimums included)
    cells = [[n * s for s in shares] for n in stratum_sizes]
    out = [[int(c) for c in row] for row in cells]
    row_need = [n - sum(row) for n, row in zip(stratum_sizes, out)]
    col_need = [t - sum(out[s][j] for s in range(len(out))) for j, t in enumerate(totals)]
    order = sorted(
        ((s, j) for s in range(len(cells)) for j in range(3)),
        key=lambda sj: (-(cells[sj[0]][sj[1]] - out[sj[0]][sj[1]]), sj[0], sj[1]),
    )
    for s, j in order:
        if row_need[s] > 0 and col_need[j] > 0:
            out[s][j] += 1
            row_need[s] -= 1
            col_need[j] -= 1
    for s in range(len(out)):
        while row_need[s] > 0:
            j = max(range(3), key=lambda k: (col_need[k], -k))
            out[s][j] += 1
            row_need[s] -= 1
            col_need[j] -= 1
    return out


def stratified_group_split(
    *,
    groups: np.ndarray,
    strata: np.ndarray,
    order_keys: np.ndarray,
    ratios=DEFAULT_RATIOS,
    pinned: np.ndarray | None = None,
) -> np.ndarray:
    """Split code (0 train, 1 val, 2 test) per item.

    ``groups[i]``: group label of item i (any integers; items sharing a label share a split).
    ``strata[i]``: stratum code of item i; a group takes the stratum of its first member (its
    smallest index), so that strata stay exact for the singletons that make up most data.
    ``order_keys[i]``: seeded pseudo-random key; a group's key is its first member's.
    ``pinned[i]``: a split code the item must keep (a workflow stage pinned it before the
    release, projects.workflow.split_for), or -1; a group with a pinned member goes there whole.

    Sizes: the release's split sizes are the largest-remainder apportionment of the items
    (``largest_remainder``: 35 items at 85/5/10 -> 30/2/3, never an empty split that was asked
    for when there are items enough); pinned items count toward them; the rest is divided among
    the strata by controlled rounding (``_stratum_targets``), so every stratum follows the
    ratios as closely as whole items allow and the global sizes are still exact. Within a
    stratum the groups are visited largest first, then in key order, and each goes to the split
    furthest below its target that it fits in (ties to train, then val, then test): only a
    group larger than every remaining gap can make a split miss its target.
    """
    ratios = check_ratios(ratios)
    n = len(groups)
    out = np.full(n, UNASSIGNED, dtype=np.int8)
    if n == 0:
        return out
    _, first_index, group_of = np.unique(groups, return_index=True, return_inverse=True)
    group_of = group_of.reshape(-1)
    sizes = np.bincount(group_of)
    n_groups = len(sizes)
    g_pin = np.full(n_groups, UNASSIGNED, dtype=np.int8)
    if pinned is not None:
        pinned = np.asarray(pinned, dtype=np.int8)
        has_pin = np.flatnonzero(pinned >= 0)
        # The first pinned member (smallest index) decides for its group.
        for i in has_pin[::-1].tolist():
            g_pin[group_of[i]] = pinned[i]
    totals = largest_remainder(n, ratios)
    pinned_counts = [int(sizes[g_pin == j].sum()) for j in range(3)]
    free_total = n - sum(pinned_counts)
    free_totals = [max(t - p, 0) for t, p in zip(totals, pinned_counts)]
    if sum(free_totals) != free_total:  # pins overfilled a split: share the rest by what is left
        free_totals = largest_remainder(free_total, free_totals if sum(free_totals) else ratios, at_least_one=False)
    g_stratum = strata[first_index]
    g_key = order_keys[first_index]
    free = g_pin < 0
    codes, stratum_of = np.unique(g_stratum[free], return_inverse=True)
    stratum_sizes = np.bincount(stratum_of.reshape(-1), weights=sizes[free], minlength=len(codes)).astype(int)
    targets = _stratum_targets(stratum_sizes.tolist(), free_totals, ratios)
    target_of = {int(c): row for c, row in zip(codes.tolist(), targets)}
    g_split = g_pin.copy()
    # Within a stratum the largest groups go first (then by seeded key): the singletons left
    # at the end fill each split up to its target exactly.
    order = np.lexsort((first_index, g_key, -sizes, g_stratum))
    size_list, stratum_list, free_list = sizes.tolist(), g_stratum.tolist(), free.tolist()
    placed_by: dict[int, list[int]] = {c: [0, 0, 0] for c in target_of}
    singles: dict[tuple[int, int], list[int]] = {}  # (split, stratum) -> singleton groups there
    for g in order.tolist():
        if not free_list[g]:
            continue
        target, placed = target_of[stratum_list[g]], placed_by[stratum_list[g]]
        size = size_list[g]
        # The split furthest below its target among those the group fits in whole; if it fits
        # in none, the split furthest below its target.
        j = max(range(3), key=lambda k: (target[k] - placed[k] >= size, target[k] - placed[k], -k))
        g_split[g] = j
        placed[j] += size
        if size == 1:
            singles.setdefault((j, stratum_list[g]), []).append(g)
    _repair_totals(g_split, free_totals, target_of, placed_by, singles)
    out[:] = g_split[group_of]
    return out


def _repair_totals(g_split, totals, target_of, placed_by, singles) -> None:
    """A group that fitted no gap of its stratum (a pair in a stratum of two that asks 0/1/1)
    leaves the global sizes off their targets: move singletons from a split above its total
    to one below, each time from the stratum most above its own target in that split (the
    latest-visited singleton there), until the totals hold or no singleton can move."""
    counts = [sum(p[j] for p in placed_by.values()) for j in range(3)]
    while True:
        over = [j for j in range(3) if counts[j] > totals[j]]
        under = [k for k in range(3) if counts[k] < totals[k]]
        if not over or not under:
            return
        moved = False
        for j in over:
            options = [s for (split, s), groups in singles.items() if split == j and groups]
            if not options:
                continue
            s = max(options, key=lambda c: (placed_by[c][j] - target_of[c][j], -c))
            k = max(under, key=lambda u: (target_of[s][u] - placed_by[s][u], -u))
            g = singles[(j, s)].pop()
            g_split[g] = k
            placed_by[s][j] -= 1
            placed_by[s][k] += 1
            counts[j] -= 1
            counts[k] += 1
            moved = True
            break
        if not moved:
            return


def split_shortfalls(*, sizes: dict, ratios, total: int) -> list[dict]:
    """Splits with fewer items than asked (the largest-remainder size of ``total``), e.g. a
    val split emptied because every candidate item was in one big near-duplicate group: shown
    on the splits page and in the datasheet, never silent."""
    asked = largest_remainder(total, check_ratios(ratios))
    out = []
    for name, want in zip(SPLITS, asked):
        have = int(sizes.get(name, 0))
        if have < want:
            out.append({"split": name, "asked": want, "actual": have})
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
