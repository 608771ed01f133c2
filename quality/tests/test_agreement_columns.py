"""quality.agreement on columns (UnitTable) equals the per-record computation it replaced.

The report used to build, per field, a list of agreement values per unit, a ``{rater: value}``
dict per unit for ``Ratings.from_items`` and one batch of pair scores over every pair of
every unit. The straightforward version is kept here as the reference, and on hostile data
(missing keys, malformed and out-of-choice values, units with one to four records, the same
person twice on a unit, fields out of scope, no units at all) every field's contributions, n,
point values, CIs, per-item scores and extras must be the same, and the dashboard's
confusions those of the per-unit loop.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import combinations

import numpy as np
import pytest
import scipy.sparse as sp

from metrics.resample import (
    LabelRatings,
    Ratings,
    alpha_contributions,
    bootstrap_figures,
    label_alpha_contributions,
    mean_contributions,
    pairwise_kappa_contributions,
    pairwise_label_kappa_contributions,
    per_label_kappas,
)
from projects.fieldtypes import CATEGORICAL, CONTINUOUS, MULTILABEL
from projects.presets import AHA_SCHEMA, MEME3W_SCHEMA, MEMECAP_SCHEMA, VIKR_SCHEMA
from projects.schema import Schema
from quality import agreement
from quality.agreement import Unit, UnitTable, as_table
from quality.analytics import _pair_counts, agreement_over_time, confusions
from quality.reports import _Codes, _Ids
from quality.tests.test_agreement import _confusions_straightforward, _matrix

SCHEMAS = {
    "meme3w": Schema(MEME3W_SCHEMA),
    "aha": Schema(AHA_SCHEMA),
    "memecap": Schema(MEMECAP_SCHEMA),
    "vikr": Schema(VIKR_SCHEMA),
}
LEXICON = {"muslims": "Muslim people", "zorg people": "people from Planet Zorg"}
WORDS = ["zorg", "people", "muslims", "the", "women", "planet"]


def _hostile_value(rng: np.random.Generator, spec: dict):
    """A stored value of the field's type, often malformed; ``...`` = the key is missing."""
    kind = spec["type"]
    junk = [..., None, "", 7, ["odd"], {"x": 1}]
    if rng.random() < 0.25:
        return junk[int(rng.integers(0, len(junk)))]
    choices = spec.get("choices", [])
    text = " ".join(rng.choice(WORDS, int(rng.integers(1, 4))).tolist())
    if kind == "choice":
        return str(rng.choice(choices[:3])) if rng.random() < 0.9 else "not a choice"
    if kind == "multichoice":
        picked = [str(c) for c in rng.choice(choices[:4], int(rng.integers(0, 3)), replace=False)]
        return picked if rng.random() < 0.85 else (picked[0] if picked else "Other") if rng.random() < 0.5 else [3]
    if kind == "boxes":
        x = int(rng.integers(0, 3)) * 100
        return [[x, x, x + 100, x + 80]][: int(rng.integers(0, 2))] + ([[1, 2]] if rng.random() < 0.1 else [])
    if kind == "checklist":
        return [{"text": text}, *([{"text": "zorg"}] if rng.random() < 0.3 else [])]
    if kind == "pairlist":
        return [dict.fromkeys(spec.get("parts", ["a", "b"]), text)]
    if kind == "textlist":
        return text.split()
    return text  # entity, span, text


def _condition_value(rng: np.random.Generator, spec: dict):
    """Mostly values that open the conditional fields, so that both scopes keep items."""
    return str(rng.choice(spec["choices"][:2]))


def hostile_units(schema: Schema, n: int, seed: int) -> list[Unit]:
    rng = np.random.default_rng(seed)
    conditions = {s["visible_if"]["field"] for s in schema.fields if s.get("visible_if")}
    units = []
    for i in range(n):
        k = int(rng.choice([1, 2, 2, 3, 3, 4]))
        people = [int(p) for p in rng.choice(7, k, replace=False)]
        if k > 2 and rng.random() < 0.05:
            people[-1] = people[0]  # the same person twice (kept as {person: value} did)
        records = []
        for _ in range(k):
            record = {}
            for spec in schema.fields:
                value = _condition_value(rng, spec) if spec["name"] in conditions else _hostile_value(rng, spec)
                if value is not ...:
                    record[spec["name"]] = value
            records.append(record)
        units.append(Unit(1000 + 3 * i, tuple(records), tuple(people)))
    return units


# ----------------------------------------------------------------------------- the reference


def _pair_means_reference(plan, rows, lexicon, threshold=None):
    if rows and all(len(row) == 2 for row in rows):
        scores = np.asarray(
            plan.ftype.pair_scores(plan.spec, [r[0] for r in rows], [r[1] for r in rows], lexicon=lexicon),
            dtype=np.float64,
        )
        return scores if threshold is None else (scores >= threshold).astype(np.float64)
    left, right, owner = [], [], []
    for i, row in enumerate(rows):
        for r, s in combinations(range(len(row)), 2):
            left.append(row[r])
            right.append(row[s])
            owner.append(i)
    if not owner:
        return np.zeros(len(rows))
    scores = plan.ftype.pair_scores(plan.spec, left, right, lexicon=lexicon)
    if threshold is not None:
        scores = (scores >= threshold).astype(np.float64)
    own = np.asarray(owner, dtype=np.intp)
    return np.bincount(own, weights=scores, minlength=len(rows)) / np.maximum(np.bincount(own, minlength=len(rows)), 1)


def _in_scope(schema, plan, unit, scope) -> bool:
    if not plan.conditional or scope == "all":
        return True
    visible = [schema.is_visible(plan.spec, v) for v in unit.values]
    return all(visible) if scope == "both" else any(visible)


def field_reference(schema, plan, units, scope, lexicon):
    """One field's (item ids, item scores, figures, extra) computed record by record."""
    mask = np.array([_in_scope(schema, plan, u, scope) for u in units], dtype=bool)
    value, spec, name = plan.ftype.agreement_value, plan.spec, plan.name
    rows_all = [[value(spec, v.get(name)) for v in u.values] if m else [] for u, m in zip(units, mask)]
    width = max((len(u.values) for u, m in zip(units, mask) if m), default=0)
    raters = [tuple(u.annotators) if width > 2 else tuple(range(len(u.values))) for u in units]
    idx = np.nonzero(mask)[0]
    rows = [rows_all[i] for i in idx]
    item_scores = _pair_means_reference(plan, rows, lexicon)
    scores_all = np.zeros(len(units))
    scores_all[idx] = item_scores
    items = [dict(zip(r, row)) if m else {} for row, r, m in zip(rows_all, raters, mask)]
    a = plan.agreement
    figures, extra = [], {}
    if a.family == CATEGORICAL:
        ratings = Ratings.from_items(items)
        figures.append(("kappa", pairwise_kappa_contributions(ratings, mask)))
        if width > 2:
            figures.append(("alpha", alpha_contributions(ratings, mask)))
        figures.append(("agreement", mean_contributions(scores_all, mask)))
    elif a.family == MULTILABEL:
        ratings = LabelRatings.from_items(items, list(plan.choices))
        macro = pairwise_label_kappa_contributions(ratings, mask)
        figures.append(("kappa", macro))
        if width > 2:
            figures.append(("alpha", label_alpha_contributions(ratings, mask)))
        figures.append(("exact", mean_contributions(scores_all, mask)))
        extra["per_label_kappa"] = (
            {x: agreement.rnd(k) for x, k in zip(ratings.labels, per_label_kappas(macro))} if ratings.rater_ids else {}
        )
    elif a.family == CONTINUOUS:
        one_pair = bool(rows) and all(len(r) == 2 for r in rows)
        shares = []
        for t in a.shares:
            per_item = np.zeros(len(units))
            per_item[idx] = (item_scores >= t) if one_pair else _pair_means_reference(plan, rows, lexicon, t)
            shares.append((f"share_{t:g}", mean_contributions(per_item, mask)))
        mean = ("mean", mean_contributions(scores_all, mask))
        figures = [mean, *shares] if a.primary == "mean" else [*shares, mean]
    figures += [(key, c) for key, _, c in plan.ftype.agreement_extra(plan.spec, rows_all, mask)]
    return [units[i].item_id for i in idx], item_scores, figures, extra


def _dense(matrix) -> np.ndarray:
    return matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix)


# ----------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("schema_name", list(SCHEMAS))
@pytest.mark.parametrize("scope", list(agreement.SCOPES))
def test_fields_on_columns_equal_the_per_record_computation(schema_name, scope):
    schema = SCHEMAS[schema_name]
    units = hostile_units(schema, 240, seed=len(schema_name) + len(scope))
    table = as_table(units)
    for plan in agreement.field_plans(schema):
        got = agreement._field(schema, plan, table, scope, LEXICON, {})
        item_ids, item_scores, figures, extra = field_reference(schema, plan, units, scope, LEXICON)
        assert list(got.item_ids) == item_ids, plan.name
        np.testing.assert_allclose(got.item_scores, item_scores, rtol=0, atol=1e-12)
        assert got.extra == extra, plan.name
        assert [key for key, *_ in got.figures] == [key for key, _ in figures], plan.name
        contributions = {}
        for (key, _, c, _), (_, ref) in zip(got.figures, figures):
            assert c.shape == ref.shape and c.n_items == ref.n_items, (plan.name, key)
            np.testing.assert_allclose(_dense(c.matrix), _dense(ref.matrix), rtol=0, atol=1e-12)
            assert (c.point() is None) == (ref.point() is None), (plan.name, key)
            if c.point() is not None:
                assert c.point() == pytest.approx(ref.point(), abs=1e-12), (plan.name, key)
            contributions[("new", key)] = c
            contributions[("ref", key)] = ref
        estimates = bootstrap_figures(contributions, n=40, seed=3)
        for key, _ in figures:
            new, ref = estimates[("new", key)], estimates[("ref", key)]
            np.testing.assert_allclose(new.resampled, ref.resampled, rtol=0, atol=1e-12)
            assert new.undefined == ref.undefined


@pytest.mark.parametrize("schema_name", list(SCHEMAS))
def test_report_figures_on_a_table_equal_those_on_units(schema_name):
    """agreement_figures and the dashboard give the same dicts from units and from a table
    built another way (columns of hashable values deduplicated, lists not)."""
    schema = SCHEMAS[schema_name]
    units = hostile_units(schema, 150, seed=9)
    from_units = agreement.agreement_figures(schema, units, lexicon=LEXICON, resamples=30)
    table = as_table(units)
    from_table = agreement.agreement_figures(schema, table, lexicon=LEXICON, resamples=30)
    assert [agreement.field_result_dict(r, "both") for r in from_units] == [
        agreement.field_result_dict(r, "both") for r in from_table
    ]
    assert agreement.slot_count(table) == agreement.slot_count(units) == 4
    assert agreement_over_time(from_table, table) == agreement_over_time(from_units, units)


@pytest.mark.parametrize("schema_name", ["meme3w", "aha"])
def test_a_taken_subset_of_a_table_equals_the_table_of_the_subset(schema_name):
    """UnitTable.take (a release's agreement.json: released items only) gives the figures of the
    units kept, as a table built from those units alone does."""
    schema = SCHEMAS[schema_name]
    units = hostile_units(schema, 120, seed=4)
    keep = np.random.default_rng(2).random(len(units)) < 0.6
    taken = UnitTable.from_units(units).take(keep)
    subset = [u for u, k in zip(units, keep, strict=True) if k]
    assert taken.item_ids.tolist() == [u.item_id for u in subset]
    assert int(taken.counts.sum()) == sum(len(u.values) for u in subset)
    got = agreement.agreement_figures(schema, taken, lexicon=LEXICON, resamples=30)
    want = agreement.agreement_figures(schema, subset, lexicon=LEXICON, resamples=30)
    assert [agreement.field_result_dict(r, "both") for r in got] == [
        agreement.field_result_dict(r, "both") for r in want
    ]
    with pytest.raises(ValueError):
        UnitTable.from_units(units).take(keep[:-1])
    # A caller done with the columns (a release) lets the table go before the bootstrap: same
    # figures, and the table's columns are gone afterwards.
    released = UnitTable.from_units(units).take(keep)
    freed = agreement.agreement_figures(schema, released, lexicon=LEXICON, resamples=30, release_table=True)
    assert [agreement.field_result_dict(r, "both") for r in freed] == [
        agreement.field_result_dict(r, "both") for r in want
    ]
    with pytest.raises(ValueError, match="released"):
        released.column(agreement.field_plans(schema)[0].name)
    assert released.completed_at == [] and int(released.counts.sum()) == int(taken.counts.sum())


def test_no_units_and_single_records():
    schema = SCHEMAS["aha"]
    for units in ([], hostile_units(schema, 1, seed=1), [Unit(1, ({"is_hateful": "Hateful"},), (4,))]):
        table = as_table(units)
        assert isinstance(table, UnitTable) and len(table) == len(units)
        for plan in agreement.field_plans(schema):
            got = agreement._field(schema, plan, table, "both", None, {})
            ids, scores, figures, extra = field_reference(schema, plan, units, "both", None)
            assert list(got.item_ids) == ids and got.extra == extra and np.array_equal(got.item_scores, scores)
            assert [c.point() for _, _, c, _ in got.figures] == [c.point() for _, c in figures]
        fast, slow = confusions(schema, table), _confusions_straightforward(schema, units)
        assert [c["matrices"] for c in fast] == [c["matrices"] for c in slow]
    assert confusions(schema, [])[0]["matrices"] == [{"pair": None, "n": 0, "counts": [[0] * 3] * 3, "kappa": None}]


@pytest.mark.parametrize("schema_name", ["meme3w", "aha", "vikr"])
def test_confusions_on_hostile_units_equal_the_per_unit_loop(schema_name):
    schema = SCHEMAS[schema_name]
    units = hostile_units(schema, 300, seed=4)
    fast = confusions(schema, units)
    slow = _confusions_straightforward(schema, units)
    assert [(c["field"], c["matrices"]) for c in fast] == [(c["field"], c["matrices"]) for c in slow]
    assert any(m["kappa"] is not None for c in fast for m in c["matrices"])


def test_matrix_from_codes_equals_the_matrix_of_values():
    from quality.analytics import _matrix_codes

    rng = np.random.default_rng(12)
    values = [None, "a", "b", "zz", 3, "c"]  # distinct; "zz" and 3 are not categories
    cats = ["a", "b", "c", None]
    for _ in range(300):
        n = int(rng.integers(0, 25))
        used = rng.choice(len(values), int(rng.integers(1, len(values) + 1)), replace=False)
        a, b = rng.choice(used, n), rng.choice(used, n)
        expected = _matrix([values[c] for c in a], [values[c] for c in b], cats)
        got = _matrix_codes(a, b, values, cats)
        assert got == expected
        if expected["kappa"] is not None:
            assert isinstance(got["kappa"], float)


@pytest.mark.parametrize("schema_name", ["aha", "meme3w"])
def test_int32_annotator_ids_give_the_figures_of_int64_ones(schema_name):
    """quality.reports keeps annotator ids as int32 when they fit: every figure (the same
    person twice on an item included, whose empty-slot marker must stay above every id) is
    the one of int64 ids."""
    schema = SCHEMAS[schema_name]
    units = hostile_units(schema, 300, seed=17)
    wide = as_table(units)
    narrow = UnitTable(wide.item_ids, wide.annotators.astype(np.int32), wide.counts, wide.completed_at, wide.column)
    assert narrow.annotators.dtype == np.int32 and wide.annotators.dtype == np.int64
    got = agreement.agreement_figures(schema, narrow, lexicon=LEXICON, resamples=20)
    want = agreement.agreement_figures(schema, wide, lexicon=LEXICON, resamples=20)
    assert [agreement.field_result_dict(r, "both") for r in got] == [
        agreement.field_result_dict(r, "both") for r in want
    ]
    assert any(len(set(u.annotators)) < len(u.annotators) for u in units)  # the duplicate case is there


def test_id_buffer_widens_when_an_id_does_not_fit_int32():
    ids = _Ids()
    ids.extend((1, 2, 3))
    assert ids.array().dtype == np.int32
    ids.extend([4, 2**31, 5])  # fails at the second id: the first is not kept twice
    ids.extend(iter([6]))  # any iterable
    assert ids.array().dtype == np.int64 and ids.array().tolist() == [1, 2, 3, 4, 2**31, 5, 6]


@pytest.mark.parametrize(("distinct", "dtype"), [(3, np.int8), (127, np.int8), (128, np.int16), (40_000, np.int32)])
def test_stored_value_codes_take_the_narrowest_type(distinct, dtype):
    """quality.reports._Codes: one code per distinct JSON text, in the narrowest integer type
    that holds every code and -1; the codes are the same."""
    codes = _Codes(str)
    keys = [f"v{i % distinct}" for i in range(2 * distinct + 5)]
    codes.add(keys[:7])
    codes.add(keys[7:])
    out = codes.codes()
    assert out.dtype == dtype and len(codes.raw) == distinct
    assert [codes.raw[c] for c in out.tolist()] == keys


def test_annotator_pair_counts_are_the_row_wise_unique():
    rng = np.random.default_rng(5)
    for lo, hi in (
        (rng.integers(0, 9, 500), rng.integers(0, 9, 500)),
        (rng.integers(0, 2**31 - 5, 50), rng.integers(2**31 - 5, 2**31 + 5, 50)),  # beyond int32: row-wise
        (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)),
    ):
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
        pairs, counts = _pair_counts(lo, hi)
        want_pairs, want_counts = np.unique(np.stack([lo, hi], axis=1), axis=0, return_counts=True)
        assert pairs.tolist() == want_pairs.tolist() and counts.tolist() == want_counts.tolist()


def test_weeks_from_microseconds_are_those_of_the_datetimes():
    """A table read from the database holds int64 microseconds: its ISO weeks (one datetime per
    distinct day) are those week_of gives each unit's datetime, undated units included, around
    week and year boundaries and before 1970."""
    from quality.agreement import EPOCH, NO_TIME, UnitTable
    from quality.analytics import _weeks

    rng = np.random.default_rng(5)
    edges = [
        datetime(2026, 3, 1, 23, 59, 59, 999999, tzinfo=UTC),  # a Sunday, then the Monday
        datetime(2026, 3, 2, 0, 0, tzinfo=UTC),
        datetime(2020, 12, 31, 12, tzinfo=UTC),  # ISO 2020-W53
        datetime(2021, 1, 4, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 0, tzinfo=UTC),
    ]
    stamps = edges + [EPOCH + timedelta(microseconds=int(u)) for u in rng.integers(0, 2 * 10**15, 300)]
    micros = np.array([(t - EPOCH) // timedelta(microseconds=1) for t in stamps] + [NO_TIME, NO_TIME])
    n = micros.size
    shape = (np.arange(n), np.zeros((n, 2), dtype=np.int64), np.full(n, 2))
    by_micros = UnitTable(*shape, micros, columns=lambda name: None)
    by_datetimes = UnitTable(*shape, [*stamps, None, None], columns=lambda name: None)
    assert by_micros.completed_micros is not None and by_datetimes.completed_micros is None
    weeks, idx = _weeks(by_micros)
    assert (weeks, idx.tolist()) == (lambda w: (w[0], w[1].tolist()))(_weeks(by_datetimes))
    assert idx[-1] == idx[-2] == -1 and weeks[idx[0]] == "2026-W09" and weeks[idx[1]] == "2026-W10"
    assert weeks[idx[2]] == "2020-W53" and weeks[idx[4]] == "1970-W01"
