"""exports.splitting: stratified group split and the integrity check. No database."""

from __future__ import annotations

import numpy as np
import pytest

from exports.splitting import SPLITS, check_ratios, exact_duplicate_groups, integrity_check, stratified_group_split


def keys(n, seed=0):
    return np.random.default_rng(seed).integers(0, 2**63, n, dtype=np.int64).astype(np.uint64)


def test_singletons_follow_the_ratios_in_every_stratum():
    n = 2000
    strata = np.repeat(np.arange(4, dtype=np.int32), n // 4)
    out = stratified_group_split(groups=np.arange(n), strata=strata, order_keys=keys(n), ratios=[0.85, 0.05, 0.10])
    for s in range(4):
        counts = np.bincount(out[strata == s], minlength=3)
        # online largest-remainder: every stratum within one item of its exact share
        assert np.all(np.abs(counts - np.array([0.85, 0.05, 0.10]) * (n // 4)) <= 1), counts


def test_small_strata_still_reach_val_and_test():
    strata = np.zeros(20, dtype=np.int32)
    out = stratified_group_split(groups=np.arange(20), strata=strata, order_keys=keys(20))
    assert sorted(np.bincount(out, minlength=3).tolist()) == [1, 2, 17]


def test_groups_are_never_split_and_sizes_still_track_ratios():
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 6, 400)
    groups = np.repeat(np.arange(400), sizes)
    strata = (groups % 2).astype(np.int32)
    out = stratified_group_split(groups=groups, strata=strata, order_keys=keys(len(groups), 2))
    for g in range(400):
        assert len(set(out[groups == g].tolist())) == 1
    share = np.bincount(out, minlength=3) / len(out)
    assert np.allclose(share, [0.85, 0.05, 0.10], atol=0.02)


def test_deterministic_for_a_seed_and_different_for_another():
    n = 500
    groups, strata = np.arange(n), np.zeros(n, dtype=np.int32)
    a = stratified_group_split(groups=groups, strata=strata, order_keys=keys(n, 5))
    b = stratified_group_split(groups=groups, strata=strata, order_keys=keys(n, 5))
    c = stratified_group_split(groups=groups, strata=strata, order_keys=keys(n, 6))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_check_ratios():
    assert check_ratios(None) == (0.85, 0.05, 0.10)
    assert check_ratios([70, 10, 20]) == pytest.approx((0.7, 0.1, 0.2))
    for bad in ([1, 2], [1, -1, 1], [0, 0, 0], ["a", 1, 1], [float("nan"), 1, 1]):
        with pytest.raises(ValueError, match="ratios"):
            check_ratios(bad)


def _check(splits, released=None, pixel=None, edges=()):
    n = len(splits)
    return integrity_check(
        node_ids=np.arange(10, 10 + n, dtype=np.int64),
        released=np.ones(n, bool) if released is None else np.asarray(released, bool),
        splits=np.asarray(splits, dtype=np.int8),
        pixel_keys=np.arange(n, dtype=np.uint64) if pixel is None else np.asarray(pixel, dtype=np.uint64),
        edges=np.asarray(edges, dtype=np.int64).reshape(-1, 2),
    )


def test_integrity_passes_a_clean_assignment():
    report = _check([0, 0, 2, 1], edges=[(0, 1)])
    assert report.ok and report.groups_checked == 3 and report.multi_member_groups == 1


def test_integrity_catches_a_pixel_hash_in_two_splits():
    report = _check([0, 2, 0], pixel=[7, 7, 8])
    assert not report.ok
    assert report.pixel_hashes_across_splits == [{"item_ids": [10, 11], "splits": ["test", "train"]}]
    assert report.exact_duplicates_in_release == 1


def test_integrity_catches_an_exact_duplicate_left_in_one_split():
    report = _check([0, 0], pixel=[7, 7])
    assert not report.ok and report.exact_duplicates_in_release == 1 and not report.pixel_hashes_across_splits


def test_integrity_catches_a_group_linked_through_an_unreleased_item():
    # 0 -- 1 -- 2 with 1 not released: 0 and 2 are one group and must share a split.
    report = _check([0, -1, 1], released=[True, False, True], edges=[(0, 1), (1, 2)])
    assert not report.ok
    assert report.groups_across_splits == [{"item_ids": [10, 12], "splits": ["train", "val"]}]
    assert _check([1, -1, 1], released=[True, False, True], edges=[(0, 1), (1, 2)]).ok


def test_split_names():
    assert SPLITS == ("train", "val", "test")


def test_exact_duplicate_groups() -> None:
    assert exact_duplicate_groups([]) == {}
    assert exact_duplicate_groups(["a", "b", "c"]) == {}
    got = exact_duplicate_groups(["x", "y", "x", "z", "y", "x"])
    assert got == {"x": [0, 2, 5], "y": [1, 4]}
    assert list(got) == ["x", "y"]


def test_35_items_at_85_5_10_give_30_2_3():
    from exports.splitting import largest_remainder

    assert largest_remainder(35, [0.85, 0.05, 0.10]) == [30, 2, 3]
    out = stratified_group_split(groups=np.arange(35), strata=np.zeros(35, dtype=np.int32), order_keys=keys(35))
    assert np.bincount(out, minlength=3).tolist() == [30, 2, 3]


def test_small_strata_do_not_empty_val_or_test():
    # 35 items in seven strata of five: the old per-stratum rule put all of them in train.
    strata = np.repeat(np.arange(7, dtype=np.int32), 5)
    out = stratified_group_split(groups=np.arange(35), strata=strata, order_keys=keys(35, 3))
    assert np.bincount(out, minlength=3).tolist() == [30, 2, 3]
    # and the val/test items come from different strata rather than one
    assert len(set(strata[out != 0].tolist())) >= 3


def test_ten_items_still_get_a_val_and_a_test_item():
    out = stratified_group_split(groups=np.arange(10), strata=np.zeros(10, dtype=np.int32), order_keys=keys(10))
    assert np.bincount(out, minlength=3).tolist() == [8, 1, 1]


def test_a_zero_ratio_split_stays_empty():
    out = stratified_group_split(
        groups=np.arange(10), strata=np.zeros(10, dtype=np.int32), order_keys=keys(10), ratios=[0.9, 0, 0.1]
    )
    assert np.bincount(out, minlength=3).tolist() == [9, 0, 1]


def test_pinned_items_keep_their_split_and_count_toward_the_sizes():
    pinned = np.full(35, -1, dtype=np.int8)
    pinned[:4] = 2  # four items pinned to test
    pinned[4] = 1
    out = stratified_group_split(
        groups=np.arange(35), strata=np.zeros(35, dtype=np.int32), order_keys=keys(35), pinned=pinned
    )
    assert out[:4].tolist() == [2, 2, 2, 2] and out[4] == 1
    assert np.bincount(out, minlength=3).tolist() == [29, 2, 4]  # pins overfill test: train and val share the rest


def test_a_group_too_big_for_val_leaves_a_shortfall_that_is_reported():
    from exports.splitting import split_shortfalls

    groups = np.array([0] * 30 + [1, 2, 3, 4, 5])  # one group of 30 must go to train whole
    out = stratified_group_split(groups=groups, strata=np.zeros(35, dtype=np.int32), order_keys=keys(35))
    sizes = dict(zip(SPLITS, np.bincount(out, minlength=3).tolist()))
    assert len(set(out[:30].tolist())) == 1
    assert sum(sizes.values()) == 35
    assert split_shortfalls(sizes={"train": 33, "val": 0, "test": 2}, ratios=[0.85, 0.05, 0.1], total=35) == [
        {"split": "val", "asked": 2, "actual": 0},
        {"split": "test", "asked": 3, "actual": 2},
    ]


def test_plan_positions_equal_a_dict_of_every_id_in_order_out_of_order_and_for_absent_ids():
    from exports.selectors.splits import _Positions

    rng = np.random.default_rng(3)
    ids = np.unique(rng.integers(1, 60_000, size=20_000)).astype(np.int64)
    truth = dict(zip(ids.tolist(), range(len(ids))))
    positions = _Positions(ids)
    ascending = list(range(0, 61_000, 3))  # a release's order: ids and gaps, several windows
    shuffled = rng.permutation(np.arange(-5, 61_000)).tolist()[:15_000]
    for item_id in ascending + shuffled + ascending[::-1] + ascending:
        assert positions.get(item_id) == truth.get(item_id), item_id
    searches = []
    search = np.searchsorted
    monkey = _Positions(ids)
    np.searchsorted = lambda *a, **k: searches.append(1) or search(*a, **k)
    try:
        for _ in range(2):  # two in-order passes (records, then annotations): a search per window
            for item_id in ids.tolist():
                assert monkey.get(item_id) is not None
    finally:
        np.searchsorted = search
    assert len(searches) <= 2 * (len(ids) // _Positions.WINDOW + 1)
    assert positions[int(ids[-1])] == len(ids) - 1
    with pytest.raises(KeyError):
        positions[int(ids[-1]) + 1]
    assert _Positions(np.zeros(0, dtype=np.int64)).get(5) is None


def test_groups_summary_lists_every_multi_member_group_of_released_items_as_a_mask_per_group_does():
    from exports.selectors.splits import SplitPlan

    rng = np.random.default_rng(7)
    n = 5_000
    node_ids = np.arange(10, 10 + 2 * n, 2)
    group_of = node_ids.copy()
    a, b = rng.integers(0, n, 800), rng.integers(0, n, 800)
    group_of[np.maximum(a, b)] = node_ids[np.minimum(a, b)]
    plan = SplitPlan.__new__(SplitPlan)
    plan.node_ids, plan.group_of = node_ids, group_of
    plan.released, plan.splits = rng.random(n) > 0.2, rng.integers(0, 3, n).astype(np.int8)
    idx = np.flatnonzero(plan.released)
    expected = []
    for rep in np.unique(group_of[idx]).tolist():  # the straightforward form: a mask per group
        members = idx[group_of[idx] == rep]
        if len(members) > 1:
            expected.append(
                {"group": rep, "item_ids": node_ids[members].tolist(), "split": SPLITS[plan.splits[members[0]]]}
            )
    assert len(expected) > 50
    assert plan.groups_summary() == expected
    assert plan.groups_summary(limit=7) == expected[:7]
