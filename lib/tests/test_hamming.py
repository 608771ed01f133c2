"""lib.hamming / lib.phash. Plain pytest, no database.

The pair search is checked against the brute force (and pybktree) on uniform and clustered
hashes, with the automatically planned strategy and with forced multi-index plans, because
small inputs are planned as brute force and would otherwise never reach the index code.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import pybktree
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lib.hamming import (
    SearchPlan,
    _split_plan,
    brute_force_pairs,
    connected_groups,
    near_duplicate_groups,
    near_duplicate_pairs,
    plan_search,
)
from lib.phash import (
    hamming_distance,
)

HYPOTHESIS = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
U64 = 2**64


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def clustered(n: int, centres: int, seed: int, max_flips: int = 6, noise: float = 0.1) -> np.ndarray:
    """Members of random centres with 0..max_flips bit flips, plus uniform noise."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, U64, max(1, centres), dtype=np.uint64)
    n_noise = int(n * noise)
    h = c[rng.integers(0, len(c), n - n_noise)]
    flips = rng.integers(0, max_flips + 1, len(h))
    for k in range(max_flips):
        sel = np.flatnonzero(flips > k)
        h[sel] ^= np.left_shift(np.uint64(1), rng.integers(0, 64, len(sel)).astype(np.uint64))
    out = np.concatenate([h, rng.integers(0, U64, n_noise, dtype=np.uint64)])
    rng.shuffle(out)
    return out


def uniform(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, U64, n, dtype=np.uint64)


def mih_plans(t: int, max_masks: int = 4000) -> list[SearchPlan]:
    """Every m-substring plan for threshold t whose probe count stays small enough to test."""
    plans = []
    for m in range(1, min(t + 1, 64) + 1):
        widths, radii = _split_plan(m, t)
        masks = sum(sum(math.comb(w, k) for k in range(1, r + 1)) for w, r in zip(widths, radii))
        if masks <= max_masks:
            plans.append(SearchPlan("mih", widths, radii))
    return plans


def as_set(pairs: np.ndarray) -> set[tuple[int, int]]:
    return {(int(i), int(j)) for i, j in pairs}


def assert_pairs_format(pairs: np.ndarray) -> None:
    assert pairs.dtype == np.int64 and pairs.ndim == 2 and pairs.shape[1] == 2
    if len(pairs):
        assert (pairs[:, 0] < pairs[:, 1]).all()
        order = np.lexsort((pairs[:, 1], pairs[:, 0]))
        assert (order == np.arange(len(pairs))).all(), "not lexicographically sorted"
        assert len(np.unique(pairs, axis=0)) == len(pairs), "duplicate rows"


def components_bfs(n: int, pairs: np.ndarray) -> np.ndarray:
    adj: list[list[int]] = [[] for _ in range(n)]
    for a, b in pairs:
        adj[int(a)].append(int(b))
        adj[int(b)].append(int(a))
    label = [-1] * n
    for s in range(n):  # ascending start: the first node reached is the component minimum
        if label[s] >= 0:
            continue
        label[s] = s
        queue = deque([s])
        while queue:
            x = queue.popleft()
            for y in adj[x]:
                if label[y] < 0:
                    label[y] = s
                    queue.append(y)
    return np.array(label, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# near_duplicate_pairs == brute force
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("t", range(11))
@pytest.mark.parametrize("kind", ["uniform", "clustered"])
def test_pairs_equal_brute_force_every_plan(t: int, kind: str) -> None:
    hashes = uniform(1500, t) if kind == "uniform" else clustered(1500, 150, seed=t)
    expected = brute_force_pairs(hashes, t)
    assert_pairs_format(expected)
    got = near_duplicate_pairs(hashes, t)
    assert np.array_equal(got, expected)
    for plan in mih_plans(t):
        assert np.array_equal(near_duplicate_pairs(hashes, t, plan=plan), expected), plan
    if kind == "clustered" and t >= 4:
        assert len(expected) > 500  # the clustered data really has pairs at these thresholds


def test_pairs_equal_brute_force_large_clustered_default_plan() -> None:
    hashes = clustered(20_000, 2_000, seed=7)
    plan = plan_search(len(np.unique(hashes)), 8)
    assert plan.method == "mih"
    expected = brute_force_pairs(hashes, 8)
    assert len(expected) > 20_000
    assert np.array_equal(near_duplicate_pairs(hashes, 8), expected)
    assert np.array_equal(near_duplicate_pairs(hashes, 8, workers=2), expected)


@HYPOTHESIS
@given(
    data=st.data(),
    t=st.integers(0, 10),
    n_centres=st.integers(1, 12),
    n=st.integers(0, 120),
)
def test_pairs_property_clustered(data: st.DataObject, t: int, n_centres: int, n: int) -> None:
    centres = data.draw(st.lists(st.integers(0, U64 - 1), min_size=n_centres, max_size=n_centres))
    members = []
    for _ in range(n):
        h = centres[data.draw(st.integers(0, n_centres - 1))]
        for bit in data.draw(st.lists(st.integers(0, 63), max_size=9)):
            h ^= 1 << bit
        members.append(h)
    hashes = np.array(members, dtype=np.uint64)
    expected = brute_force_pairs(hashes, t)
    plans = mih_plans(t, max_masks=600)
    plan = plans[data.draw(st.integers(0, len(plans) - 1))]
    chunk = data.draw(st.sampled_from([1, 7, 1 << 20]))
    assert np.array_equal(near_duplicate_pairs(hashes, t, plan=plan, chunk=chunk), expected)
    assert np.array_equal(near_duplicate_pairs(hashes, t), expected)


@HYPOTHESIS
@given(st.lists(st.integers(0, U64 - 1), max_size=80), st.integers(0, 70))
def test_pairs_property_arbitrary(values: list[int], t: int) -> None:
    expected = {
        (i, j)
        for i in range(len(values))
        for j in range(i + 1, len(values))
        if hamming_distance(values[i], values[j]) <= t
    }
    got = near_duplicate_pairs(values, t)
    assert_pairs_format(got)
    assert as_set(got) == expected
    assert as_set(brute_force_pairs(values, t)) == expected


def test_pairs_match_pybktree() -> None:
    hashes = clustered(1500, 150, seed=3)
    items = [(int(h), i) for i, h in enumerate(hashes.tolist())]
    tree = pybktree.BKTree(lambda a, b: (a[0] ^ b[0]).bit_count(), items)
    expected = set()
    for item in items:
        for _, other in tree.find(item, 8):
            if other[1] > item[1]:
                expected.add((item[1], other[1]))
    assert len(expected) > 1000
    assert as_set(near_duplicate_pairs(hashes, 8)) == expected


def test_wide_substrings_use_binary_search() -> None:
    # 2 substrings of 32 bits with radius 1 exceed the dense-table limit.
    hashes = clustered(3000, 300, seed=11, max_flips=3)
    plan = SearchPlan("mih", *_split_plan(2, 3))
    assert plan.widths == (32, 32) and plan.radii == (1, 1)
    assert np.array_equal(near_duplicate_pairs(hashes, 3, plan=plan), brute_force_pairs(hashes, 3))


def test_huge_buckets_are_processed_in_chunks() -> None:
    # 1500 distinct hashes share their top 40 bits: every substring there is one bucket.
    rng = np.random.default_rng(5)
    prefix = np.uint64(0xABCDEF1234 << 24)
    low = rng.choice(1 << 24, 1500, replace=False).astype(np.uint64)
    hashes = np.concatenate([prefix | low, np.repeat(prefix, 150)])  # plus 150 exact copies
    expected = brute_force_pairs(hashes, 10)
    for plan in (None, *mih_plans(10, max_masks=600)):
        got = near_duplicate_pairs(hashes, 10, plan=plan, chunk=1000)
        assert np.array_equal(got, expected)


# --------------------------------------------------------------------------------------------
# edge cases
# --------------------------------------------------------------------------------------------


def test_empty_and_single() -> None:
    for data in (np.array([], dtype=np.uint64), [], np.array([42], dtype=np.uint64)):
        for t in (0, 8, 64):
            out = near_duplicate_pairs(data, t)
            assert out.shape == (0, 2) and out.dtype == np.int64
            assert brute_force_pairs(data, t).shape == (0, 2)
    assert connected_groups(0, np.zeros((0, 2))).shape == (0,)


def test_all_identical() -> None:
    hashes = np.full(300, 0xFFFF_0000_FFFF_0000, dtype=np.uint64)
    expected = np.array([(i, j) for i in range(300) for j in range(i + 1, 300)])
    for t in (0, 1, 8):
        assert np.array_equal(near_duplicate_pairs(hashes, t, chunk=1000), expected)
    assert (near_duplicate_groups(hashes, 0) == 0).all()


def test_threshold_zero_is_exact_duplicates() -> None:
    hashes = np.array([5, 7, 5, 1 << 63, 7, 5, (1 << 63) | 1], dtype=np.uint64)
    assert as_set(near_duplicate_pairs(hashes, 0)) == {(0, 2), (0, 5), (2, 5), (1, 4)}


def test_threshold_64_and_more_is_all_pairs() -> None:
    hashes = uniform(60, 1)
    hashes[0] = 0
    hashes[1] = U64 - 1  # distance 64 from hashes[0]
    expected = np.array([(i, j) for i in range(60) for j in range(i + 1, 60)])
    for t in (64, 100):
        assert np.array_equal(near_duplicate_pairs(hashes, t), expected)
        assert np.array_equal(brute_force_pairs(hashes, t), expected)
    assert (0, 1) not in as_set(near_duplicate_pairs(hashes, 63))


def test_top_bit_and_signed_input() -> None:
    base = (1 << 63) | 0x0123_4567_89AB_CDEF
    values = [base, base ^ 1, base ^ (1 << 62) ^ (1 << 5), U64 - 1, (U64 - 1) ^ (1 << 63), 3]
    unsigned = np.array(values, dtype=np.uint64)
    expected = {(0, 1), (0, 2), (1, 2), (3, 4)}
    assert as_set(near_duplicate_pairs(unsigned, 3)) == expected
    assert as_set(near_duplicate_pairs(values, 3)) == expected  # Python ints above 2^63
    signed = unsigned.view(np.int64)  # as read back from a signed BIGINT column
    assert (signed < 0).sum() == 4
    assert as_set(near_duplicate_pairs(signed, 3)) == expected
    assert as_set(near_duplicate_pairs([int(v) for v in signed], 3)) == expected
    for plan in mih_plans(3):
        assert as_set(near_duplicate_pairs(unsigned, 3, plan=plan)) == expected


def test_invalid_input() -> None:
    with pytest.raises(ValueError):
        near_duplicate_pairs([1, 2], -1)
    with pytest.raises(ValueError):
        near_duplicate_pairs([1, 2], 2.5)
    with pytest.raises(ValueError):
        near_duplicate_pairs(np.zeros((2, 2), dtype=np.uint64))
    with pytest.raises(TypeError):
        near_duplicate_pairs(np.array([1.0, 2.0]))
    with pytest.raises(ValueError):
        near_duplicate_pairs([U64])
    with pytest.raises(ValueError):
        near_duplicate_pairs(np.array([-1, 2], dtype=np.int32))


def test_plan_must_cover_the_threshold() -> None:
    with pytest.raises(ValueError):
        near_duplicate_pairs(uniform(10, 0), 8, plan=SearchPlan("mih", (32, 32), (3, 3)))  # 4 + 4 <= 8
    with pytest.raises(ValueError):
        near_duplicate_pairs(uniform(10, 0), 2, plan=SearchPlan("mih", (32, 31), (1, 1)))  # 63 bits


def test_plan_choice() -> None:
    assert plan_search(50, 8).method == "brute"
    big = plan_search(1_000_000, 8)
    assert big.method == "mih" and big.widths == (22, 21, 21) and big.radii == (2, 2, 2)
    assert plan_search(1_000_000, 64).method == "brute"  # everything pairs anyway
    for t in range(12):
        widths, radii = _split_plan(t + 1, t)
        assert sum(widths) == 64 and not any(radii)  # the classic exact-substring scheme
        for m in range(1, t + 2):
            widths, radii = _split_plan(m, t)
            assert sum(widths) == 64 and sum(r + 1 for r in radii) > t


# --------------------------------------------------------------------------------------------
# groups
# --------------------------------------------------------------------------------------------


def _graphs(n: int) -> st.SearchStrategy[tuple[int, list[tuple[int, int]]]]:
    node = st.integers(0, n - 1)
    return st.tuples(st.just(n), st.lists(st.tuples(node, node), max_size=90))


@HYPOTHESIS
@given(st.integers(1, 60).flatmap(_graphs))
def test_connected_groups_match_bfs(case: tuple[int, list[tuple[int, int]]]) -> None:
    n, edges = case
    pairs = np.array(edges, dtype=np.int64).reshape(-1, 2)
    expected = components_bfs(n, pairs)
    assert np.array_equal(connected_groups(n, pairs), expected)
    assert np.array_equal(connected_groups(n, pairs[::-1, ::-1]), expected)  # order-independent
    assert np.array_equal(connected_groups(n, edges), expected)


def test_connected_groups_long_chain_and_star() -> None:
    n = 50_000
    rng = np.random.default_rng(0)
    perm = rng.permutation(n)
    chain = np.stack([perm[:-1], perm[1:]], axis=1)  # one path visiting all nodes in random order
    assert (connected_groups(n, chain) == 0).all()
    star = np.stack([np.full(n - 1, n - 1), np.arange(n - 1)], axis=1)
    assert (connected_groups(n, star) == 0).all()
    two = connected_groups(6, [(5, 3), (4, 2)])
    assert two.tolist() == [0, 1, 2, 3, 2, 3]
    with pytest.raises(ValueError):
        connected_groups(3, [(0, 3)])


def test_near_duplicate_groups_on_clusters() -> None:
    rng = np.random.default_rng(2)
    centres = rng.integers(0, U64, 50, dtype=np.uint64)
    # Centres are ~32 bits apart; members within 2 flips of their centre are within 4 of each other.
    label = np.repeat(np.arange(50), 6)
    hashes = centres[label].copy()
    for _ in range(2):
        hashes ^= np.left_shift(np.uint64(1), rng.integers(0, 64, len(hashes)).astype(np.uint64))
    perm = rng.permutation(len(hashes))
    hashes, label = hashes[perm], label[perm]
    groups = near_duplicate_groups(hashes, 4)
    for g in range(50):
        members = np.flatnonzero(label == g)
        assert (groups[members] == members.min()).all()
