"""quality.agreement and quality.sampling without a database: every figure equals what metrics/
computes on the same values, every CI equals the percentile of the straightforward recompute on
the same resample indices, and the stratified sample is proportional, covering and seeded."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.agreement import cohen_kappa, confusion_matrix, krippendorff_alpha, macro_pairwise_kappa
from metrics.bootstrap import percentile_interval, resample_indices
from metrics.boxes import enclosing_iou
from metrics.entity import f1_rel
from metrics.text import token_f1
from projects.presets import AHA_SCHEMA, MEME3W_SCHEMA
from projects.schema import Schema
from quality import agreement
from quality.agreement import Unit
from quality.sampling import SamplingError, allocate, stratified_sample

MEME3W = Schema(MEME3W_SCHEMA)
AHA = Schema(AHA_SCHEMA)
R = agreement.RESAMPLES


def fig(results, field, key):
    r = next(r for r in results if r.plan.name == field)
    return next(f for f in r.figures if f["key"] == key)


def recompute_ci(n_items: int, stat) -> list[float]:
    """The straightforward bootstrap: the statistic recomputed on each resample's items."""
    values = np.array([v if (v := stat(idx)) is not None else np.nan for idx in resample_indices(n_items, R, 0)])
    lo, hi = percentile_interval(values, agreement.LEVEL)
    return [round(lo, 6), round(hi, 6)]


def units_of(field: str, pairs, annotators=None, extra=None):
    """Units with one field set (plus ``extra`` fields on every record)."""
    out = []
    for i, values in enumerate(pairs):
        people = annotators[i] if annotators else tuple(range(len(values)))
        out.append(Unit(i, tuple({**(extra or {}), field: v} for v in values), tuple(people)))
    return out


HARMFUL = {"label": "harmful"}


def test_plans_follow_the_field_types_not_the_preset():
    kinds = {p.name: (p.metric, p.kind, p.conditional) for p in agreement.field_plans(MEME3W)}
    assert kinds == {
        "label": ("cohen_kappa", "categorical", False),
        "target_category": ("cohen_kappa", "categorical", True),
        "target_entity": ("f1_rel", "continuous", True),
        "text_mention": ("token_f1", "continuous", True),
        "visual_region": ("enclosing_iou", "continuous", True),
    }
    assert [p.name for p in agreement.target_plans(agreement.field_plans(MEME3W))] == [
        "target_category",
        "target_entity",
        "text_mention",
        "visual_region",
    ]
    assert {p.kind for p in agreement.field_plans(AHA)} == {"categorical", "multilabel"}


def test_two_raters_categorical_is_cohen_kappa_with_the_recomputed_ci():
    a = ["gender", "gender", "religion and caste", None, "group background", "gender", None, "gender"]
    b = ["gender", "religion and caste", "religion and caste", None, "group background", "gender", "gender", "gender"]
    units = units_of("target_category", list(zip(a, b)), extra=HARMFUL)
    results = agreement.agreement_figures(MEME3W, units, lexicon=None)
    k = fig(results, "target_category", "kappa")
    assert k["primary"] and k["n"] == 8 and k["resamples"] == R
    assert k["value"] == round(cohen_kappa(a, b), 6)
    aa, bb = np.array(a, dtype=object), np.array(b, dtype=object)
    assert k["ci"] == recompute_ci(8, lambda idx: cohen_kappa(list(aa[idx]), list(bb[idx])))
    per_item = np.array([1.0 if x == y else 0.0 for x, y in zip(a, b)])
    agree = fig(results, "target_category", "agreement")
    assert agree["value"] == round(per_item.mean(), 6)
    assert agree["ci"] == recompute_ci(8, lambda idx: float(per_item[idx].mean()))


def test_continuous_fields_use_the_metric_of_their_type():
    lex = {"Muslims": "Muslim people"}
    ents = [("Muslims", "Muslim people"), ("women", "Black women"), ("immigrants", "refugees"), ("Zorgs", "Zorgs")]
    results = agreement.agreement_figures(MEME3W, units_of("target_entity", ents, extra=HARMFUL), lexicon=lex)
    scores = np.array([f1_rel(x, y, lex) for x, y in ents])
    assert fig(results, "target_entity", "mean")["value"] == round(scores.mean(), 6)
    assert fig(results, "target_entity", "mean")["ci"] == recompute_ci(4, lambda idx: float(scores[idx].mean()))
    assert fig(results, "target_entity", "share_0.7")["value"] == round(np.mean(scores >= 0.7), 6)

    boxes = [
        ([[0, 0, 100, 100]], [[0, 0, 100, 90]]),
        ([[0, 0, 100, 100]], [[0, 0, 60, 100]]),
        ([[5, 5, 50, 50]], [[5, 5, 50, 50]]),
        ([[0, 0, 10, 10]], []),
    ]
    results = agreement.agreement_figures(MEME3W, units_of("visual_region", boxes, extra=HARMFUL), lexicon=None)
    ious = [enclosing_iou(x, y) for x, y in boxes]
    r = next(r for r in results if r.plan.name == "visual_region")
    assert r.primary["key"] == "share_0.75"
    assert fig(results, "visual_region", "share_0.75")["value"] == 0.5 == round(np.mean([i >= 0.75 for i in ious]), 6)
    assert fig(results, "visual_region", "share_0.5")["value"] == 0.75
    assert fig(results, "visual_region", "mean")["value"] == round(np.mean(ious), 6)

    spans = [("people from Planet Zorg", "Planet Zorg"), ("Zorg", "Zorg")]
    results = agreement.agreement_figures(MEME3W, units_of("text_mention", spans, extra=HARMFUL), lexicon=None)
    assert fig(results, "text_mention", "mean")["value"] == round(np.mean([token_f1(x, y) for x, y in spans]), 6)


def test_three_annotators_pair_by_person_not_by_submission_order():
    """The same three people submit in different orders: slot pairs would mix them up (issue
    19.4: slot pairs 0.657/0.351/0.351 vs person pairs 0.526/0.500/0.333)."""
    people = [(1, 2, 3), (3, 1, 2), (2, 3, 1), (1, 3, 2), (2, 1, 3), (3, 2, 1), (1, 2, 3), (2, 3, 1)]
    by_person = {  # each person's choice per item
        1: ["gender", "gender", None, "gender", "religion and caste", None, "gender", "gender"],
        2: ["gender", "religion and caste", None, "gender", "gender", None, "group background", "gender"],
        3: ["religion and caste", "gender", None, "gender", "gender", "gender", "gender", "gender"],
    }
    values = [tuple(by_person[p][i] for p in order) for i, order in enumerate(people)]
    units = units_of("target_category", values, annotators=people, extra=HARMFUL)
    results = agreement.agreement_figures(MEME3W, units, lexicon=None)
    pair = [cohen_kappa(by_person[x], by_person[y]) for x, y in [(1, 2), (1, 3), (2, 3)]]
    k = fig(results, "target_category", "kappa")
    assert k["value"] == round(np.mean([v for v in pair if v is not None]), 6)
    slot = [cohen_kappa([v[r] for v in values], [v[s] for v in values]) for r, s in [(0, 1), (0, 2), (1, 2)]]
    assert k["value"] != round(np.mean(slot), 6)  # the old, wrong pairing
    alpha = fig(results, "target_category", "alpha")
    # "no value" is a category of its own (None would mean "did not rate" to krippendorff_alpha)
    data = [["(none)" if v is None else v for v in by_person[p]] for p in (1, 2, 3)]
    assert alpha["value"] == round(krippendorff_alpha(data), 6)
    cols = np.array(data, dtype=object)

    def alpha_of(idx):
        return krippendorff_alpha([list(row[idx]) for row in cols])

    assert alpha["ci"] == recompute_ci(8, alpha_of)


def test_multilabel_is_macro_kappa_over_labels_and_person_pairs():
    p = next(x for x in agreement.field_plans(AHA) if x.name == "hateful_type")
    rows = [
        [["Mocking"], ["Mocking"], ["Mocking", "Slurs"]],
        [["Slurs"], ["Slurs"], ["Slurs"]],
        [["Mocking"], ["Contempt"], ["Mocking"]],
        [["Contempt"], ["Contempt"], ["Mocking"]],
    ]
    people = [(1, 2, 3), (2, 3, 1), (3, 1, 2), (1, 2, 3)]
    units = [
        Unit(i, tuple({"is_hateful": "Hateful", "hateful_type": v} for v in row), people[i])
        for i, row in enumerate(rows)
    ]
    results = agreement.agreement_figures(AHA, units, lexicon=None)
    by_person = {q: [None] * 4 for q in (1, 2, 3)}
    for i, row in enumerate(rows):
        for q, v in zip(people[i], row):
            by_person[q][i] = set(v)
    r = next(r for r in results if r.plan.name == "hateful_type")
    assert r.primary["value"] == round(macro_pairwise_kappa([by_person[q] for q in (1, 2, 3)], p.choices), 6)
    assert r.extra["per_label_kappa"]["Mocking"] == round(
        macro_pairwise_kappa([by_person[q] for q in (1, 2, 3)], ["Mocking"]), 6
    )
    assert fig(results, "hateful_type", "alpha")["value"] is not None


def test_scope_decides_which_items_target_fields_use():
    harmful = {
        "label": "harmful",
        "target_category": "gender",
        "target_entity": "x",
        "text_mention": None,
        "visual_region": [],
    }
    other = {
        "label": "non-harmful",
        "target_category": None,
        "target_entity": None,
        "text_mention": None,
        "visual_region": [],
    }
    units = [Unit(1, (harmful, harmful), (1, 2)), Unit(2, (harmful, other), (1, 2)), Unit(3, (other, other), (1, 2))]
    n = {
        scope: {
            r.plan.name: len(r.item_ids)
            for r in agreement.agreement_figures(MEME3W, units, lexicon=None, scope=scope, with_ci=False)
        }
        for scope in ("both", "either", "all")
    }
    assert n["both"] == {"label": 3, "target_category": 1, "target_entity": 1, "text_mention": 1, "visual_region": 1}
    assert n["either"]["target_entity"] == 2 and n["all"]["target_entity"] == 3 and n["either"]["label"] == 3


def test_reference_scoring_skips_items_where_neither_record_has_the_field():
    """Issue 19.3: non-harmful gold and blind records agreeing on "no target" are not scored on
    the target fields (that inflated Table 9); the label is scored on every item."""
    harmful = {
        "label": "harmful",
        "target_category": "gender",
        "target_entity": "Zorg women",
        "text_mention": None,
        "visual_region": [],
    }
    wrong = {**harmful, "target_category": "religion and caste", "target_entity": "Zorgs"}
    none = {
        "label": "non-harmful",
        "target_category": None,
        "target_entity": None,
        "text_mention": None,
        "visual_region": [],
    }
    pairs = [(harmful, harmful), (harmful, wrong), (none, none), (none, none), (none, harmful)]
    results = agreement.reference_scores(MEME3W, pairs, [1, 2, 3, 4, 5], lexicon=None)
    t9 = {row["field"]: row for row in agreement.table9(results)["rows"]}
    assert t9["target_category"]["n"] == 3 and t9["target_entity"]["n"] == 3  # items 1, 2, 5
    assert fig(results, "target_category", "agreement")["value"] == round(1 / 3, 6)
    assert fig(results, "label", "agreement")["n"] == 5


def test_table9_mean_is_unweighted_over_target_fields():
    gold = {
        "label": "harmful",
        "target_category": "gender",
        "target_entity": "Zorg women",
        "text_mention": "Zorg",
        "visual_region": [[0, 0, 100, 100]],
    }
    blind = {**gold, "target_entity": "women of Zorg", "text_mention": "Planet Zorg"}
    other = {**gold, "target_category": "religion and caste"}
    results = agreement.reference_scores(MEME3W, [(gold, blind), (other, other)], [1, 2], lexicon=None)
    t9 = agreement.table9(results)
    values = {r["field"]: r["value"] for r in t9["rows"]}
    assert values["target_category"] == 1.0
    assert values["target_entity"] == round((0.8 + 1.0) / 2, 6)
    assert values["text_mention"] == round((2 / 3 + 1.0) / 2, 6)
    assert values["visual_region"] == 1.0
    assert t9["mean"] == round(sum(values.values()) / 4, 6)


def test_empty_input_gives_undefined_figures_not_errors():
    results = agreement.agreement_figures(MEME3W, [], lexicon=None)
    assert all(f["value"] is None and f["n"] == 0 for r in results for f in r.figures)
    assert agreement.table9(results)["mean"] is None


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


def _random_units(schema_name: str, n: int, seed: int):
    """Meme3W-like pairs or AHA-like triples of records from 6 people over 5 ISO weeks."""
    from datetime import UTC, datetime, timedelta

    rng = np.random.default_rng(seed)
    start = datetime(2026, 3, 2, tzinfo=UTC)
    units = []
    for i in range(n):
        when = start + timedelta(days=int(rng.integers(0, 35)), hours=int(rng.integers(0, 24)))
        if schema_name == "meme3w":
            people = tuple(int(x) for x in rng.choice(6, 2, replace=False))
            records = []
            for _ in people:
                if rng.random() < 0.5:
                    records.append({"label": "non-harmful"})
                    continue
                x = float(rng.integers(0, 50))
                records.append(
                    {
                        "label": "harmful",
                        "target_category": str(rng.choice(MEME3W_SCHEMA["fields"][1]["choices"])),
                        "target_entity": str(rng.choice(["Muslim people", "muslims", "women", "migrants"])),
                        "text_mention": str(rng.choice(["muslims", "the women", "them", ""])),
                        "visual_region": [[x, x, x + 40, x + 30]] if rng.random() < 0.7 else [],
                    }
                )
        else:
            people = tuple(int(x) for x in rng.choice(6, 3, replace=False))
            records = []
            for _ in people:
                if rng.random() < 0.4:
                    k = int(rng.integers(1, 3))
                    records.append(
                        {
                            "is_hateful": "Hateful",
                            "hateful_type": [
                                str(t) for t in rng.choice(["Mocking", "Slurs", "Contempt"], k, replace=False)
                            ],
                            "targeted_categories": [str(rng.choice(["race", "religion", "sex"]))],
                        }
                    )
                else:
                    records.append(
                        {"is_hateful": "Not-Hateful", "non_hateful_type": [str(rng.choice(["Humor", "Sarcasm"]))]}
                    )
        units.append(Unit(i, tuple(records), people, completed_at=when if i % 17 else None))
    return units


@pytest.mark.parametrize("schema_name, scope", [("meme3w", "both"), ("meme3w", "either"), ("aha", "both")])
def test_weekly_series_equals_the_figures_recomputed_on_each_weeks_items(schema_name, scope):
    """The dashboard's trend line sums the report's per-item contributions per week; it must be
    the figure recomputed on that week's items alone (the straightforward way)."""
    from quality.analytics import agreement_over_time, week_of

    schema = MEME3W if schema_name == "meme3w" else AHA
    units = _random_units(schema_name, 400, seed=7)
    results = agreement.agreement_figures(
        schema, units, lexicon={"muslims": "Muslim people"}, scope=scope, with_ci=False
    )
    series = agreement_over_time(results, units)
    assert len(series["weeks"]) >= 5
    checked = 0
    for w_i, week in enumerate(series["weeks"]):
        subset = [u for u in units if week_of(u.completed_at) == week]
        again = agreement.agreement_figures(
            schema, subset, lexicon={"muslims": "Muslim people"}, scope=scope, with_ci=False
        )
        for line in series["series"]:
            res = next(r for r in again if r.plan.name == line["field"])
            point = line["points"][w_i]
            assert point["n"] == len(res.item_ids), (week, line["field"])
            expected = res.primary["value"] if res.primary and res.item_ids else None
            if expected is None:
                assert point["value"] is None
            else:
                assert point["value"] == pytest.approx(expected, abs=1e-12), (week, line["field"])
                checked += 1
    assert checked >= 4 * len(series["series"])
    # undated items (completed_at None) are in the report but in no week
    assert sum(p["n"] for p in series["series"][0]["points"]) == sum(1 for u in units if u.completed_at)


def _in_scope_per_unit(schema, plan, unit, scope) -> bool:
    """The per-unit rule scope_mask replaced (reference): Schema.is_visible on each record."""
    if not plan.conditional or scope == "all":
        return True
    visible = [schema.is_visible(plan.spec, v) for v in unit.values]
    return all(visible) if scope == "both" else any(visible)


def test_scope_mask_equals_the_per_unit_rule():
    units = _random_units("meme3w", 300, seed=3)
    for plan in agreement.field_plans(MEME3W):
        for scope in agreement.SCOPES:
            fast = agreement.scope_mask(MEME3W, plan, units, scope, {})
            slow = [_in_scope_per_unit(MEME3W, plan, u, scope) for u in units]
            assert fast.tolist() == slow, (plan.name, scope)


def _matrix(a: list, b: list, cats: list) -> dict:
    """A confusion matrix of two sequences of values over ``cats`` (values outside them count
    in n and kappa, not in the grid), and their Cohen's kappa: the reference of quality.analytics'
    _matrix_codes, which the dashboard uses."""
    grid = [[0] * len(cats) for _ in cats]
    if a:
        cm, seen = confusion_matrix(a, b)
        pos = {c: i for i, c in enumerate(cats)}
        for i, ci_ in enumerate(seen):
            for j, cj in enumerate(seen):
                if ci_ in pos and cj in pos:
                    grid[pos[ci_]][pos[cj]] += int(cm[i, j])
    return {"n": len(a), "counts": grid, "kappa": agreement.rnd(cohen_kappa(a, b)) if a else None}


def _confusions_straightforward(schema, units, max_pairs=4):
    """The per-unit loop the vectorized quality.analytics.confusions replaced (reference)."""
    from collections import defaultdict
    from itertools import combinations

    out = []
    for plan in agreement.field_plans(schema):
        if plan.kind != "categorical":
            continue
        cats = [*plan.choices, None]
        pooled_a, pooled_b = [], []
        per_pair = defaultdict(lambda: ([], []))
        for u in units:
            vals = [plan.ftype.agreement_value(plan.spec, v.get(plan.name)) for v in u.values]
            for r, s in combinations(range(len(vals)), 2):
                pooled_a.append(vals[r])
                pooled_b.append(vals[s])
                key = (u.annotators[r], u.annotators[s])
                flip = key[0] > key[1]
                pa, pb = per_pair[tuple(sorted(key))]
                pa.append(vals[s] if flip else vals[r])
                pb.append(vals[r] if flip else vals[s])
        matrices = [{"pair": None, **_matrix(pooled_a, pooled_b, cats)}]
        ranked = sorted(per_pair.items(), key=lambda kv: (-len(kv[1][0]), kv[0]))[:max_pairs]
        for (x, y), (a, b) in ranked:
            matrices.append({"pair": [x, y], **_matrix(a, b, cats)})
        out.append({"field": plan.name, "matrices": matrices})
    return out


@pytest.mark.parametrize("schema_name", ["meme3w", "aha"])
def test_confusions_and_worst_items_equal_the_straightforward_loops(schema_name):
    from quality.analytics import confusions, worst_items

    schema = MEME3W if schema_name == "meme3w" else AHA
    units = _random_units(schema_name, 500, seed=11)
    fast = confusions(schema, units)
    slow = _confusions_straightforward(schema, units)
    assert [(c["field"], c["matrices"]) for c in fast] == [(c["field"], c["matrices"]) for c in slow]
    assert all(len(c["matrices"]) == 5 for c in fast)

    results = agreement.agreement_figures(schema, units, lexicon=None, with_ci=False)
    per_item = {}
    for r in results:
        for item_id, score in zip(r.item_ids, r.item_scores):
            per_item.setdefault(item_id, {})[r.plan.name] = float(score)
    expected = []
    for item_id, scores in per_item.items():
        mean = sum(scores.values()) / len(scores)
        if mean < 1.0:
            expected.append(
                {
                    "item_id": item_id,
                    "score": agreement.rnd(mean),
                    "fields": {k: agreement.rnd(v) for k, v in scores.items() if v < 1.0},
                }
            )
    expected.sort(key=lambda r: (r["score"], r["item_id"]))
    assert worst_items(results) == expected[:15]
    assert worst_items(results, limit=400) == expected[:400]
