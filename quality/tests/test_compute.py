"""quality.compute and quality.sampling without a database: every figure equals what metrics/
computes on the same values, and the stratified sample is proportional, covering and seeded."""
from __future__ import annotations

import numpy as np
import pytest

from metrics.agreement import cohen_kappa, kappa_ci, krippendorff_alpha, macro_pairwise_kappa
from metrics.bootstrap import mean_ci
from metrics.boxes import enclosing_iou
from metrics.entity import f1_rel
from metrics.text import token_f1
from projects.presets import AHA_SCHEMA, MEME3W_SCHEMA
from projects.schema import Schema
from quality import compute
from quality.compute import Unit
from quality.sampling import SamplingError, allocate, stratified_sample

MEME3W = Schema(MEME3W_SCHEMA)
AHA = Schema(AHA_SCHEMA)


def plan(schema, name):
    return next(p for p in compute.field_plans(schema) if p.name == name)


def fig(result, key):
    return next(f for f in result.figures if f["key"] == key)


def test_plans_follow_the_field_types_not_the_preset():
    kinds = {p.name: (p.metric, p.kind, p.conditional) for p in compute.field_plans(MEME3W)}
    assert kinds == {
        "label": ("cohen_kappa", "categorical", False),
        "target_category": ("cohen_kappa", "categorical", True),
        "target_entity": ("f1_rel", "continuous", True),
        "text_mention": ("token_f1", "continuous", True),
        "visual_region": ("enclosing_iou", "continuous", True),
    }
    assert [p.name for p in compute.target_plans(compute.field_plans(MEME3W))] == [
        "target_category", "target_entity", "text_mention", "visual_region"]
    assert {p.kind for p in compute.field_plans(AHA)} == {"categorical", "multilabel"}


def test_two_raters_categorical_equals_cohen_kappa_and_kappa_ci():
    a = ["gender", "gender", "religion and caste", None, "group background", "gender", None]
    b = ["gender", "religion and caste", "religion and caste", None, "group background", "gender", "gender"]
    res = compute.field_agreement(plan(MEME3W, "target_category"), [list(x) for x in zip(a, b)], list(range(7)), lexicon=None)
    k = fig(res, "kappa")
    assert k["primary"] and k["n"] == 7
    assert k["value"] == round(cohen_kappa(a, b), 6)
    assert k["ci"] == [round(x, 6) for x in kappa_ci(a, b, n=10000, seed=0)]
    agree = fig(res, "agreement")
    per_item = [1.0 if x == y else 0.0 for x, y in zip(a, b)]
    assert agree["value"] == round(np.mean(per_item), 6)
    assert agree["ci"] == [round(x, 6) for x in mean_ci(per_item, n=10000, seed=0)]


def test_continuous_fields_use_the_metric_of_their_type():
    lex = {"Muslims": "Muslim people"}
    ents = [("Muslims", "Muslim people"), ("women", "Black women"), ("immigrants", "refugees"), (None, None)]
    res = compute.field_agreement(plan(MEME3W, "target_entity"), [list(p) for p in ents], [1, 2, 3, 4], lexicon=lex)
    scores = [f1_rel(x, y, lex) for x, y in ents]
    assert fig(res, "mean")["value"] == round(np.mean(scores), 6)
    assert fig(res, "mean")["ci"] == [round(x, 6) for x in mean_ci(scores, n=10000, seed=0)]
    assert fig(res, "share_0.7")["value"] == round(np.mean([s >= 0.7 for s in scores]), 6)

    boxes = [([[0, 0, 100, 100]], [[0, 0, 100, 90]]), ([[0, 0, 100, 100]], [[0, 0, 60, 100]]), ([], []),
             ([[0, 0, 10, 10]], [])]
    res = compute.field_agreement(plan(MEME3W, "visual_region"), [list(p) for p in boxes], [1, 2, 3, 4], lexicon=None)
    ious = [enclosing_iou(x, y) for x, y in boxes]
    assert res.primary["key"] == "share_0.75"
    assert fig(res, "share_0.75")["value"] == 0.5 == round(np.mean([i >= 0.75 for i in ious]), 6)
    assert fig(res, "share_0.5")["value"] == 0.75
    assert fig(res, "mean")["value"] == round(np.mean(ious), 6)

    spans = [("people from Planet Zorg", "Planet Zorg"), ("Zorg", "Zorg")]
    res = compute.field_agreement(plan(MEME3W, "text_mention"), [list(p) for p in spans], [1, 2], lexicon=None)
    assert res.primary["value"] == round(np.mean([token_f1(x, y) for x, y in spans]), 6)


def test_three_raters_average_pairs_and_add_alpha():
    rows = [["gender", "gender", "gender"], ["gender", None, "gender"], [None, None, None],
            ["religion and caste", "gender", "religion and caste"], ["gender", "gender"]]  # last item: 2 slots
    res = compute.field_agreement(plan(MEME3W, "target_category"), rows, list(range(5)), lexicon=None)
    pair_kappas = []
    for r, s in [(0, 1), (0, 2), (1, 2)]:
        both = [row for row in rows if len(row) > s]
        pair_kappas.append(cohen_kappa([x[r] for x in both], [x[s] for x in both]))
    assert fig(res, "kappa")["value"] == round(np.mean([k for k in pair_kappas if k is not None]), 6)
    data = [[(row[s] if row[s] is not None else compute.NO_VALUE) if s < len(row) else None for row in rows] for s in range(3)]
    assert fig(res, "alpha")["value"] == round(krippendorff_alpha(data), 6)
    lo, hi = fig(res, "alpha")["ci"]
    assert lo <= hi


def test_multilabel_is_macro_pairwise_kappa_over_the_choices():
    p = plan(AHA, "hateful_type")
    rows = [[["Mocking"], ["Mocking"], ["Mocking", "Slurs"]], [["Slurs"], [], ["Slurs"]], [[], [], []],
            [["Contempt"], ["Contempt"], ["Mocking"]]]
    res = compute.field_agreement(p, rows, [1, 2, 3, 4], lexicon=None)
    slots = [[set(r[s]) for r in rows] for s in range(3)]
    assert res.primary["value"] == round(macro_pairwise_kappa(slots, p.choices), 6)
    assert res.extra["per_label_kappa"]["Mocking"] == round(macro_pairwise_kappa(slots, ["Mocking"]), 6)
    assert fig(res, "alpha")["value"] is not None


def test_scope_decides_which_items_target_fields_use():
    harmful = {"label": "harmful", "target_category": "gender", "target_entity": "x", "text_mention": None, "visual_region": []}
    other = {"label": "non-harmful", "target_category": None, "target_entity": None, "text_mention": None, "visual_region": []}
    units = [Unit(1, (harmful, harmful), (1, 2)), Unit(2, (harmful, other), (1, 2)), Unit(3, (other, other), (1, 2))]
    n = {scope: {r.plan.name: len(r.item_ids) for r in compute.agreement_figures(MEME3W, units, lexicon=None, scope=scope, with_ci=False)}
         for scope in ("both", "either", "all")}
    assert n["both"] == {"label": 3, "target_category": 1, "target_entity": 1, "text_mention": 1, "visual_region": 1}
    assert n["either"]["target_entity"] == 2 and n["all"]["target_entity"] == 3 and n["either"]["label"] == 3


def test_table9_mean_is_unweighted_over_target_fields():
    gold = {"label": "harmful", "target_category": "gender", "target_entity": "Zorg women", "text_mention": "Zorg",
            "visual_region": [[0, 0, 100, 100]]}
    blind = {**gold, "target_entity": "women of Zorg", "text_mention": "Planet Zorg"}
    other = {**gold, "target_category": "religion and caste"}
    results = compute.reference_scores(MEME3W, [(gold, blind), (other, other)], [1, 2], lexicon=None)
    t9 = compute.table9(results)
    values = {r["field"]: r["value"] for r in t9["rows"]}
    assert values["target_category"] == 1.0
    assert values["target_entity"] == round((0.8 + 1.0) / 2, 6)
    assert values["text_mention"] == round((2 / 3 + 1.0) / 2, 6)
    assert values["visual_region"] == 1.0
    assert t9["mean"] == round(sum(values.values()) / 4, 6)


def test_empty_input_gives_undefined_figures_not_errors():
    results = compute.agreement_figures(MEME3W, [], lexicon=None)
    assert all(f["value"] is None and f["n"] == 0 for r in results for f in r.figures)
    assert compute.table9(results)["mean"] is None


# ---------------------------------------------------------------------------- sampling

def test_allocation_is_proportional_with_one_per_stratum():
    sizes = {"a": 500, "b": 300, "c": 150, "d": 40, "e": 7, "f": 3, "empty": 0}
    alloc = allocate(sizes, 200)
    assert sum(alloc.values()) == 200
    assert "empty" not in alloc and all(v >= 1 for v in alloc.values())
    assert alloc["a"] == 100 and alloc["b"] == 60 and alloc["c"] == 30 and alloc["d"] == 8
    assert alloc["f"] == 1  # floor(0.6) lifted to the minimum of one
    assert allocate({"a": 2, "b": 1}, 3) == {"a": 2, "b": 1}


@pytest.mark.parametrize("n,msg", [(11, "larger than"), (2, "smaller than the 3 non-empty strata")])
def test_allocation_refuses_impossible_sizes(n, msg):
    with pytest.raises(SamplingError, match=msg):
        allocate({"a": 5, "b": 3, "c": 2}, n)


def test_stratified_sample_is_reproducible_and_covers_every_stratum():
    strata = {f"s{k}": list(range(k * 100, k * 100 + 5 + 10 * k)) for k in range(6)}
    first = stratified_sample(strata, 40, seed=11)
    assert first == stratified_sample(dict(reversed(list(strata.items()))), 40, seed=11)
    assert first != stratified_sample(strata, 40, seed=12)
    assert set(first) == set(strata) and all(first[k] for k in strata)
    assert all(set(v) <= set(strata[k]) for k, v in first.items())
    assert sum(len(v) for v in first.values()) == 40


def test_prefer_pushes_ineligible_items_back():
    strata = {"a": list(range(10))}
    sample = stratified_sample(strata, 5, seed=3, prefer=lambda i: i % 2 == 0)
    assert sample["a"] == [0, 2, 4, 6, 8]
