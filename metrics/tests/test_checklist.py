from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from metrics.checklist import (
    LAYERS,
    layer_scores,
    leaderboard_spearman,
    requirement_passes,
    success_kappas,
    vikr_scores,
    vikr_summary,
)

CHECK = {"V": ["v1", "v2", "v3"], "I": ["i1"], "K": ["k1", "k2"], "R": ["r1"]}


def all_pass(checklist: dict = CHECK) -> dict:
    return {layer: dict.fromkeys(ids, True) for layer, ids in checklist.items()}


def test_both_judges_pass_everything() -> None:
    assert layer_scores(CHECK, all_pass(), all_pass()) == {"V": 1, "I": 1, "K": 1, "R": 1}
    s = vikr_scores([CHECK], [all_pass()], [all_pass()])
    assert s.success.tolist() == [1] and s.three_of_four.tolist() == [1]


def test_one_judge_fails_one_requirement() -> None:
    b = all_pass()
    b["K"]["k2"] = False  # judge B fails one Knowledge requirement
    passes = requirement_passes(CHECK, all_pass(), b)
    assert passes["K"] == [True, False]  # the requirement fails (intersection) ...
    assert layer_scores(CHECK, all_pass(), b) == {"V": 1, "I": 1, "K": 0, "R": 1}  # ... so the layer
    s = vikr_scores([CHECK], [all_pass()], [b])
    assert s.success.tolist() == [0]  # ... so Success
    assert s.three_of_four.tolist() == [1]  # three layers still pass
    # each judge alone: A passes everything, B does not
    assert vikr_scores([CHECK], [all_pass()]).success.tolist() == [1]
    assert vikr_scores([CHECK], [b]).success.tolist() == [0]


def test_judges_failing_different_requirements_of_two_layers() -> None:
    a, b = all_pass(), all_pass()
    a["V"]["v3"] = False
    b["R"]["r1"] = False
    s = vikr_scores([CHECK], [a], [b])
    assert s.layers.tolist() == [[0, 1, 1, 0]] and s.success.tolist() == [0] and s.three_of_four.tolist() == [0]


def test_missing_and_malformed_verdicts_fail() -> None:
    for broken in (
        {**all_pass(), "V": {"v1": True, "v2": True}},  # v3 missing
        {**all_pass(), "I": None},  # layer missing
        {k: v for k, v in all_pass().items() if k != "R"},  # layer absent
        {**all_pass(), "K": {"k1": True, "k2": "yes"}},  # not a boolean
        {**all_pass(), "K": {"k1": True, "k2": 1}},
        None,  # no output at all
    ):
        assert vikr_scores([CHECK], [all_pass()], [broken]).success.tolist() == [0]
    # extra ids the reference does not have are ignored
    extra = all_pass()
    extra["V"]["v99"] = False
    assert vikr_scores([CHECK], [all_pass()], [extra]).success.tolist() == [1]
    assert vikr_scores([CHECK], [{**all_pass(), "V": {"v1": np.True_, "v2": True, "v3": True}}]).success.tolist() == [1]


def test_malformed_checklists_raise() -> None:
    with pytest.raises(ValueError):
        layer_scores({"V": ["v1"], "I": ["i1"], "K": ["k1"]}, all_pass())  # no R layer
    with pytest.raises(ValueError):
        layer_scores({**CHECK, "I": []}, all_pass())  # empty layer would pass vacuously
    with pytest.raises(ValueError):
        layer_scores({**CHECK, "V": ["v1", "v1"]}, all_pass())
    with pytest.raises(ValueError):
        vikr_scores([CHECK, CHECK], [all_pass()], [all_pass(), all_pass()])
    with pytest.raises(ValueError):
        requirement_passes(CHECK)


def test_means_and_summary() -> None:
    rng = np.random.default_rng(0)
    checklists, ja, jb = [], [], []
    for _ in range(200):
        ck = {layer: [f"{layer}{k}" for k in range(rng.integers(1, 5))] for layer in LAYERS}
        checklists.append(ck)
        ja.append({layer: {rid: bool(rng.random() < 0.9) for rid in ids} for layer, ids in ck.items()})
        jb.append({layer: {rid: bool(rng.random() < 0.85) for rid in ids} for layer, ids in ck.items()})
    s = vikr_scores(checklists, ja, jb)
    means = s.means()
    assert means["Success"] == pytest.approx(np.mean(s.layers.prod(axis=1)))
    assert means["3of4"] >= means["Success"]
    for j, layer in enumerate(LAYERS):
        assert means[layer] == pytest.approx(s.layers[:, j].mean())
    # intersection is never above either judge alone
    assert means["Success"] <= min(
        vikr_scores(checklists, ja).means()["Success"], vikr_scores(checklists, jb).means()["Success"]
    )
    summary = vikr_summary(s, n=300)
    assert summary["Success"].value == pytest.approx(means["Success"])
    assert summary["Success"].ci[0] <= means["Success"] <= summary["Success"].ci[1]
    assert set(summary) == {*LAYERS, "Success", "3of4"}
    assert np.isnan(vikr_scores([], [], []).means()["Success"])


def test_success_kappas_and_spearman() -> None:
    human = [1, 0, 1, 1, 0, 0, 1, 0]
    a = [1, 0, 1, 0, 0, 0, 1, 1]
    both = [1, 0, 1, 0, 0, 0, 1, 0]
    got = success_kappas(human, {"a": a, "intersection": both})
    assert got["a"] == pytest.approx(cohen_kappa_score(human, a), abs=1e-12)
    assert got["intersection"] == pytest.approx(cohen_kappa_score(human, both), abs=1e-12)
    assert success_kappas([1, 1], {"x": [1, 1]}) == {"x": None}
    with pytest.raises(ValueError):
        success_kappas(human, {"a": a[:3]})
    board_a = {"m1": 0.603, "m2": 0.537, "m3": 0.409, "m4": 0.383, "m5": 0.383}
    board_b = {"m1": 0.55, "m2": 0.50, "m3": 0.40, "m4": 0.30, "m5": 0.35, "only_b": 0.9}
    rho = leaderboard_spearman(board_a, board_b)
    # ties (m4, m5 on board a) get mid-ranks 1.5, 1.5: rho = Pearson of ranks
    ranks_a = [5, 4, 3, 1.5, 1.5]
    ranks_b = [5, 4, 3, 1, 2]
    assert rho == pytest.approx(np.corrcoef(ranks_a, ranks_b)[0, 1], abs=1e-12)
    assert rho == pytest.approx(stats.spearmanr(list(board_a.values()), [board_b[m] for m in board_a]).statistic)
    assert leaderboard_spearman({"m1": 1.0}, {"m1": 2.0}) is None
    assert leaderboard_spearman({"m1": 1.0, "m2": 1.0}, {"m1": 2.0, "m2": 3.0}) is None
    assert leaderboard_spearman({"a": 1, "b": 2, "c": 3}, {"a": 3, "b": 2, "c": 1}) == pytest.approx(-1.0)
