"""Agreement figures of a report, driven by the schema's field types (no Django).

Plain values in, JSON-ready dicts out. Every formula comes from ``metrics/``; this module only
decides *which* values are compared and *over which items*, and packages the figures with
their n and CI (SPEC section 3).

What a field type computes is declared by the type (projects.fieldtypes ``Agreement``): a
*family* of figures, the value shape (``agreement_value``) and the batch similarity of paired
values (``pair_scores``). Nothing here knows a preset or a type name.

=============  ==============================================================================
family         figures (primary first)
=============  ==============================================================================
categorical    Cohen's κ between the two annotations; >2 annotators per item: mean Cohen's κ
               over annotator pairs (people) + Krippendorff's α (nominal); observed agreement
multilabel     per-label binary κ macro-averaged over labels and annotator pairs (AHA 3.4);
               >2 annotators: + mean per-label α; identical label sets
continuous     mean similarity and the shares at or above the type's thresholds (Meme3W
               Stage 2: share F1_rel >= 0.7, IoU >= 0.75 / 0.5)
=============  ==============================================================================

Raters: with two annotations per item, the two annotations (Cohen's κ "between the two
annotations", Meme3W Stage 2). With more (AHA: three), **people**: κ is computed for each pair
of annotators over the items both annotated, then averaged (AHA 3.4), never by submission
slot, which would put the same two people in different "pairs" from item to item.

Scopes (which items a conditional field is scored on; SPEC section 3, Meme3W Stage 2): "both"
(every record makes the field applicable: field-specific agreement, the default), "either"
(at least one does: a harmfulness disagreement also counts against every target field) or
"all". Items where no record makes a target field applicable are never scored on it by
"both" or "either", so pairs of absent values never inflate a figure.

Bootstrap: one shared resample of the report's items for every figure (metrics.resample:
weighted sums of per-item contributions, so 1,000 resamples of 1M items take seconds), the
same number of resamples at every size (``RESAMPLES``), percentile 95% CIs, fixed seed: same
data, same figures, byte for byte.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import combinations
from typing import Any

import numpy as np

from lib.memory import release_free_memory
from metrics.resample import (
    Contributions,
    Estimate,
    LabelRatings,
    Ratings,
    alpha_contributions,
    bootstrap_figures,
    compact_scores,
    label_alpha_contributions,
    mean_contributions_at,
    pairwise_kappa_contributions,
    pairwise_label_kappa_contributions,
    per_label_kappas,
    two_rater_kappa_contributions,
    unique_inverse,
)
from projects.fieldtypes import CATEGORICAL, CONTINUOUS, MULTILABEL, Agreement, FieldType

#: Bump when the meaning of a stored report changes: cached rows of older versions are ignored.
REPORT_VERSION = 4
RESAMPLES = 1000
SEED = 0
LEVEL = 0.95
DIGITS = 6

SCOPES = {
    "both": "items where every annotator's record makes the field applicable (e.g. both marked the meme "
    "harmful): field-specific agreement, as in Meme3W Stage 2; a harmfulness disagreement is measured "
    "once, by the label figure, not again in every target field",
    "either": "items where at least one record makes the field applicable (e.g. at least one marked the meme "
    "harmful): a harmful/non-harmful disagreement also counts against every target field",
    "all": "all items of the report, including those where the field applies to no record (pairs of absent "
    "values count as agreement)",
}
DEFAULT_SCOPE = "both"
SCOPE_SHORT = {
    "both": "items where every record makes this field applicable (e.g. all marked the meme harmful)",
    "either": "items where at least one record makes this field applicable (e.g. one marked harmful)",
    "all": "all items of the report",
}


def rnd(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), DIGITS)


def method_text(n: int = RESAMPLES) -> str:
    return (
        f"percentile {round(LEVEL * 100)}% CI over items from {n:,} bootstrap resamples, one resample of the "
        f"report's items shared by every figure (metrics.resample), seed {SEED}"
    )


@dataclass(frozen=True)
class FieldPlan:
    name: str
    label: str
    type: str
    metric: str
    kind: str
    conditional: bool
    choices: tuple
    spec: dict = field(compare=False, hash=False)
    ftype: FieldType = field(compare=False, hash=False, default=None)

    @property
    def agreement(self) -> Agreement:
        return self.ftype.agreement


def field_plans(schema) -> list[FieldPlan]:
    """One plan per schema field, from its field type (projects.fieldtypes.REGISTRY)."""
    plans = []
    for spec in schema.fields:
        ftype = schema.type_of(spec["name"])
        plans.append(
            FieldPlan(
                name=spec["name"],
                label=spec.get("label") or spec["name"],
                type=spec["type"],
                metric=ftype.agreement.metric,
                kind=ftype.agreement.family,
                conditional=spec.get("visible_if") is not None,
                choices=tuple(spec.get("choices", ())),
                spec=spec,
                ftype=ftype,
            )
        )
    return plans


def target_plans(plans: list[FieldPlan]) -> list[FieldPlan]:
    """The fields of Table 9: the conditional (target) fields, or every field if none is conditional."""
    cond = [p for p in plans if p.conditional]
    return cond or list(plans)


@dataclass(frozen=True)
class Unit:
    """One item's records to compare: annotations (``annotators`` = people) or a reference
    and another record (audit, model scores)."""

    item_id: int
    values: tuple[dict, ...]
    annotators: tuple[int, ...]
    completed_at: datetime | None = None


#: A unit's completion time as int64 microseconds since EPOCH (UnitTable): none.
NO_TIME = np.iinfo(np.int64).min
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def datetimes_of_micros(micros: np.ndarray) -> list[datetime | None]:
    return [None if us == NO_TIME else EPOCH + timedelta(microseconds=us) for us in micros.tolist()]


@dataclass(frozen=True)
class Column:
    """One field's stored values in every record of a :class:`UnitTable`: ``codes[i, s]``
    indexes ``raw`` (decoded stored values, None = absent) for the record in slot s of unit i,
    -1 where unit i has no slot s. Records holding the same stored value share a code, so
    what depends only on the value (its agreement value, a condition, a pair's similarity) is
    computed once per distinct value (or pair of values), not once per record."""

    codes: np.ndarray
    raw: list


class UnitTable:
    """The units of a report as arrays (columns), not per-record dicts: ``item_ids`` (n,),
    ``annotators`` (n, slots) with -1 past a unit's ``counts``, ``completed_at`` per unit and
    one :class:`Column` per field, built on first use by ``columns(name)``
    (quality.reports reads them straight from the database; :meth:`from_units` from units)."""

    def __init__(self, item_ids, annotators, counts, completed_at: list | np.ndarray, columns: Callable[[str], Column]):
        self.item_ids = np.asarray(item_ids, dtype=np.int64)
        self.counts = np.asarray(counts, dtype=np.intp)
        # int32 ids stay int32 (quality.reports: half the memory of the (units x slots) table).
        annotators = np.asarray(annotators)
        self.annotators = annotators if annotators.dtype in (np.int32, np.int64) else annotators.astype(np.int64)
        if self.annotators.ndim != 2 or self.annotators.shape[0] != self.item_ids.size:
            raise ValueError("annotators must be an (items, slots) array")
        # A list of datetimes (None: undated), or int64 microseconds since the epoch (NO_TIME:
        # undated) turned into that list on first use: a release's agreement.json never reads
        # them, and 1M datetime objects were ~56 MB (bench/scale.py).
        if isinstance(completed_at, np.ndarray):
            self._completed, self._completed_us = None, np.asarray(completed_at, dtype=np.int64)
        else:
            self._completed, self._completed_us = list(completed_at), None
        self._build = columns
        self._columns: dict[str, Column] = {}

    @property
    def completed_at(self) -> list:
        if self._completed is None:
            self._completed, self._completed_us = datetimes_of_micros(self._completed_us), None
        return self._completed

    @property
    def completed_micros(self) -> np.ndarray | None:
        """The completion times as int64 microseconds since EPOCH (NO_TIME: undated), when
        the table holds them so (not yet turned into datetimes); else None."""
        return self._completed_us

    def __len__(self) -> int:
        return int(self.item_ids.size)

    @property
    def width(self) -> int:
        return int(self.annotators.shape[1])

    def column(self, name: str) -> Column:
        if name not in self._columns:
            if self._build is None:
                raise ValueError("the table's columns were released (UnitTable.release)")
            self._columns[name] = self._build(name)
        return self._columns[name]

    def release(self) -> None:
        """Let go of the columns, annotators and completion times (the counts and ids stay): a
        caller done with them frees them before a bootstrap (a release's agreement.json)."""
        self._build, self._columns, self._completed, self._completed_us = None, {}, [], None
        self.annotators = np.zeros((len(self), 0), dtype=np.int64)  # and the width: nothing is read again

    def drop(self, name: str) -> None:
        """Let go of one built column (a caller done with that field: agreement_figures frees
        each field's codes once its figures are computed). Building it again needs a table
        whose columns can be rebuilt (UnitTable.from_units; quality.reports builds each once)."""
        self._columns.pop(name, None)

    def take(self, keep) -> UnitTable:
        """The units where the boolean array ``keep`` is true (their columns on first use)."""
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != self.item_ids.shape:
            raise ValueError("keep must have one entry per unit")

        def column(name: str) -> Column:
            whole = self.column(name)
            return Column(whole.codes[keep], whole.raw)

        if self._completed_us is not None:
            completed = self._completed_us[keep]
        else:
            completed = [c for c, k in zip(self._completed, keep.tolist(), strict=True) if k]
        return UnitTable(self.item_ids[keep], self.annotators[keep], self.counts[keep], completed, column)

    @classmethod
    def from_units(cls, units: list[Unit]) -> UnitTable:
        n = len(units)
        counts = np.fromiter((len(u.values) for u in units), dtype=np.intp, count=n)
        width = int(counts.max()) if n else 0
        annotators = np.full((n, width), -1, dtype=np.int64)
        for i, u in enumerate(units):
            annotators[i, : len(u.annotators)] = u.annotators

        def column(name: str) -> Column:
            codes = np.full((n, width), -1, dtype=np.intp)
            index: dict = {}
            raw: list = []
            for i, u in enumerate(units):
                for s, v in enumerate(u.values):
                    value = v.get(name)
                    try:
                        key = (type(value), value)
                        c = index.get(key)
                    except TypeError:  # unhashable (a list): a code of its own
                        key, c = None, None
                    if c is None:
                        c = len(raw)
                        raw.append(value)
                        if key is not None:
                            index[key] = c
                    codes[i, s] = c
            return Column(codes, raw)

        return cls([u.item_id for u in units], annotators, counts, [u.completed_at for u in units], column)


def as_table(units: list[Unit] | UnitTable) -> UnitTable:
    return units if isinstance(units, UnitTable) else UnitTable.from_units(units)


def _lookup(column: Column, per_value: np.ndarray, fill) -> np.ndarray:
    """``per_value[codes]`` with ``fill`` where a slot is empty."""
    table = np.append(per_value, np.asarray([fill], dtype=per_value.dtype))
    return table[np.where(column.codes >= 0, column.codes, np.intp(len(per_value)))]  # codes may be int8


def _condition_key(schema, spec: dict) -> str:
    """The chain of visible_if conditions a field depends on (fields sharing it share the answer)."""
    chain = []
    while spec.get("visible_if") is not None:
        chain.append(spec["visible_if"])
        spec = schema.by_name[spec["visible_if"]["field"]]
    return json.dumps(chain, sort_keys=True, default=str)


def _visibility(schema, spec: dict, table: UnitTable, cache: dict) -> np.ndarray | None:
    """Per unit, per slot: is the field visible in that record (Schema.is_visible), computed
    once per distinct chain of conditions (Meme3W's four target fields share one) and once per
    distinct stored value of each condition field. None: always visible."""
    cond = spec.get("visible_if")
    if cond is None:
        return None
    key = _condition_key(schema, spec)
    if key not in cache:
        parent = _visibility(schema, schema.by_name[cond["field"]], table, cache)
        column, allowed = table.column(cond["field"]), cond["in"]
        holds = np.fromiter((v in allowed for v in column.raw), dtype=bool, count=len(column.raw))
        visible = _lookup(column, holds, False)
        cache[key] = visible if parent is None else parent & visible
    return cache[key]


def scope_mask(
    schema, plan: FieldPlan, units: list[Unit] | UnitTable, scope: str, cache: dict | None = None
) -> np.ndarray:
    """Per unit: is the field scored on it under ``scope`` (every record, or at least one, makes it
    visible), for all units at once (bench/scale.py: a per-unit test cost ~30% of a report)."""
    table = as_table(units)
    n = len(table)
    if not plan.conditional or scope == "all":
        return np.ones(n, dtype=bool)
    visible = _visibility(schema, plan.spec, table, {} if cache is None else cache)
    filled = np.arange(table.width)[None, :] < table.counts[:, None]
    if scope == "both":
        return (visible | ~filled).all(axis=1)
    return (visible & filled).any(axis=1)


@dataclass
class FieldResult:
    plan: FieldPlan
    figures: list[dict]
    #: the scored items; from the report an array.array of int64 (a list held an int object per
    #: item and field, ~290 MB at 1M items)
    item_ids: Sequence[int]
    #: per scored item, mean pair similarity (1 = all records agree); same order as item_ids
    item_scores: np.ndarray
    extra: dict = field(default_factory=dict)
    #: positions in the report's units of the scored items (same order as item_ids)
    unit_index: np.ndarray | None = None
    #: per-unit contributions of the primary figure: any subset of the units (a week of the
    #: dashboard's trend line) is a weighted sum of them, not a recompute
    primary_contributions: Contributions | None = None

    @property
    def primary(self) -> dict | None:
        return next((f for f in self.figures if f["primary"]), None)


#: Resamples per weight block of a bootstrap run with release_table (agreement_figures).
RELEASE_BLOCK = 8
#: Distinct value pairs per batch call of a field type's pair_scores (_pair_means).
_PAIR_BATCH = 32_768


def _pair_means(
    plan: FieldPlan,
    codes: np.ndarray,
    counts: np.ndarray,
    values: list,
    lexicon,
    thresholds: tuple[float, ...] = (),
) -> list[np.ndarray]:
    """Per item (rows of ``codes``, ``counts`` records each): the mean over its pairs of records
    of the pair similarity, then of (similarity >= t) for each threshold t. The type's batch
    call scores each distinct pair of values once (``values[code]`` = agreement value); per
    item the pairs are added in the order of ``combinations`` (the per-item sum of before)."""
    m = codes.shape[0]
    pairs = [(r, s) for r, s in combinations(range(codes.shape[1]), 2)]
    two = codes.shape[1] == 2 and bool((counts == 2).all())
    if two:  # every item has its two records: the slots themselves, no gathered copies
        left, right = codes[:, 0], codes[:, 1]
    else:
        valid = [np.nonzero(counts > s)[0] for _, s in pairs]
        left = np.concatenate([codes[v, r] for (r, _), v in zip(pairs, valid)]) if pairs else np.zeros(0, np.intp)
        right = np.concatenate([codes[v, s] for (_, s), v in zip(pairs, valid)]) if pairs else np.zeros(0, np.intp)
    if not left.size:
        return [np.zeros(m) for _ in range(1 + len(thresholds))]
    # int64 unless the product of two codes fits int32 (codes may be int32, quality.reports).
    bound = len(values) * len(values)
    keys = left.astype(np.int32 if bound < np.iinfo(np.int32).max else np.int64)
    keys *= len(values)
    keys += right
    keys, inverse = unique_inverse(keys, bound)
    # In batches of distinct pairs: a type's batch call builds per-pair temporaries (boxes: the
    # enclosing rectangles of both sides as Python tuples, then arrays), ~60 MB at 1M items
    # for the 300k distinct region pairs in one call (bench/scale.py).
    per_key = np.empty(keys.size)
    for at in range(0, keys.size, _PAIR_BATCH):
        part = keys[at : at + _PAIR_BATCH]
        a = [values[k] for k in (part // len(values)).tolist()]
        b = [values[k] for k in (part % len(values)).tolist()]
        per_key[at : at + part.size] = np.asarray(
            plan.ftype.pair_scores(plan.spec, a, b, lexicon=lexicon), dtype=np.float64
        )
    if two:  # the common case: one pair per item, its score is the item's
        # Thresholds and 0/1 scores per distinct pair, then per item: uint8 (compact_scores),
        # no float64 column per item in between.
        return [compact_scores(x)[inverse] for x in (per_key, *((per_key >= t) for t in thresholds))]
    scores = per_key[inverse]
    del per_key
    n_pairs = np.bincount(np.concatenate(valid), minlength=m)
    out = []
    for per_pair in [scores, *((scores >= t).astype(np.float64) for t in thresholds)]:
        total, at = np.zeros(m), 0
        for v in valid:
            total[v] += per_pair[at : at + v.size]
            at += v.size
        out.append(total / np.maximum(n_pairs, 1))
    return out


@dataclass
class _Pending:
    """A field's figures before the shared bootstrap: (key, label, contributions, primary)."""

    plan: FieldPlan
    #: the table's item ids (all units; shared, not a copy) and the scored units' positions
    table_ids: np.ndarray
    unit_index: np.ndarray
    #: per scored unit; uint8 when every score is 0 or 1 (two records of a categorical field)
    item_scores: np.ndarray
    figures: list[tuple[str, str, Contributions, bool]]
    extra: dict

    @property
    def item_ids(self) -> array:
        return array("q", self.table_ids[self.unit_index].astype(np.int64).tobytes())

    @property
    def n_items(self) -> int:
        return int(self.unit_index.size)


def _rater_items(rows: list[list[Any]], raters: list[tuple], mask: np.ndarray) -> list[dict]:
    """{rater: value} per item (empty outside the mask: the item contributes nothing)."""
    return [dict(zip(r, row)) if m else {} for row, r, m in zip(rows, raters, mask)]


def _rows(table: UnitTable, column: Column, values: list, mask: np.ndarray) -> list[list[Any]]:
    """Per unit, its records' agreement values (empty outside the mask)."""
    codes = column.codes.tolist()
    counts = table.counts.tolist()
    return [[values[c] for c in codes[i][: counts[i]]] if m else [] for i, m in enumerate(mask.tolist())]


def _ratings(table: UnitTable, column: Column, values: list, mask: np.ndarray, width: int, labels=None):
    """Ratings (labels None) or LabelRatings of the units in the mask: raters are the slots
    with two records per item, else the annotators (people, see the module docstring)."""
    filled = (np.arange(table.width)[None, :] < table.counts[:, None]) & mask[:, None]
    filled, codes = filled[:, :width], column.codes[:, :width]
    people = table.annotators[:, :width]
    if width <= 2:
        raters = np.where(filled, np.arange(width)[None, :], -1)
    else:
        raters = np.where(filled, people, -1)
        empty = np.iinfo(people.dtype).max  # above every id, of the ids' own dtype (int32 or int64)
        ordered = np.sort(np.where(filled, people, empty), axis=1)
        if width and ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] != empty)).any():
            # One person twice on an item: {person: value} keeps their last value (as before).
            items = _rater_items(_rows(table, column, values, mask), [tuple(r) for r in people.tolist()], mask)
            return Ratings.from_items(items) if labels is None else LabelRatings.from_items(items, labels)
    if labels is None:
        return Ratings.from_codes(raters, codes, values)
    return LabelRatings.from_codes(raters, codes, values, labels)


def _overrides_extra(ftype: FieldType) -> bool:
    return type(ftype).agreement_extra is not FieldType.agreement_extra


def _scored_rows(mask: np.ndarray, seen: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The positions of the mask (int32 below 2**31 units) and a uint8 column of ones, the
    same objects for fields scored on the same units (the fields under one condition): the
    bootstrap then reads their weights once."""
    idx = np.flatnonzero(mask)
    if mask.size < np.iinfo(np.int32).max:
        idx = idx.astype(np.int32)
    for rows, ones in seen:
        if np.array_equal(rows, idx):
            return rows, ones
    seen.append((idx, np.ones(idx.size, dtype=np.uint8)))
    return seen[-1]


def _field(
    schema,
    plan: FieldPlan,
    table: UnitTable,
    scope: str,
    lexicon,
    cache: dict | None = None,
    seen: list[tuple[np.ndarray, np.ndarray]] | None = None,
) -> _Pending:
    mask = scope_mask(schema, plan, table, scope, cache)
    column = table.column(plan.name)
    # Agreement values once per distinct stored value (the items out of scope contribute nothing).
    values = [plan.ftype.agreement_value(plan.spec, v) for v in column.raw]
    idx, ones = _scored_rows(mask, [] if seen is None else seen)
    n = len(table)
    width = int(np.max(table.counts, where=mask, initial=0))
    a = plan.agreement
    shares = a.shares if a.family == CONTINUOUS else ()
    # Every unit scored (a field with no condition): the table's own arrays, no gathered copies.
    whole = idx.size == n
    codes, counts = (column.codes[:, :width], table.counts) if whole else (column.codes[idx, :width], table.counts[idx])
    means = [compact_scores(m) for m in _pair_means(plan, codes, counts, values, lexicon, shares)]
    del codes, counts
    # Each step's temporaries (at 1M items tens of MB) go back to the OS before the next one's.
    release_free_memory()
    item_scores = means[0]
    figures: list[tuple[str, str, Contributions, bool]] = []
    extra: dict = {}
    if a.family == CATEGORICAL:
        if width <= 2:
            # Two slots are the two raters: the kappa straight from the codes (no Ratings).
            codes = column.codes
            none = np.full(len(codes), -1, dtype=codes.dtype)  # a table with fewer slots
            first = codes[:, 0] if codes.shape[1] > 0 else none
            second = codes[:, 1] if codes.shape[1] > 1 else none
            figures.append(("kappa", "Cohen's κ", two_rater_kappa_contributions(first, second, values, mask), True))
        else:
            ratings = _ratings(table, column, values, mask, width)
            release_free_memory()
            label = "mean Cohen's κ over annotator pairs"
            figures.append(("kappa", label, pairwise_kappa_contributions(ratings, mask), True))
            figures.append(("alpha", "Krippendorff's α (nominal)", alpha_contributions(ratings, mask), False))
        figures.append(
            ("agreement", "observed agreement", mean_contributions_at(item_scores, idx, n, ones=ones), False)
        )
    elif a.family == MULTILABEL:
        ratings = _ratings(table, column, values, mask, width, labels=list(plan.choices))
        release_free_memory()
        macro = pairwise_label_kappa_contributions(ratings, mask)
        figures.append(("kappa", "per-label κ, macro over labels and annotator pairs", macro, True))
        if width > 2:
            figures.append(
                (
                    "alpha",
                    "Krippendorff's α (binary per label, mean over labels)",
                    label_alpha_contributions(ratings, mask),
                    False,
                )
            )
        figures.append(("exact", "identical label sets", mean_contributions_at(item_scores, idx, n, ones=ones), False))
        extra["per_label_kappa"] = (
            {x: rnd(k) for x, k in zip(ratings.labels, per_label_kappas(macro))} if ratings.rater_ids else {}
        )
    elif a.family == CONTINUOUS:
        share_figs = [
            (
                f"share_{t:g}",
                f"share {a.measure} ≥ {t:g}",
                mean_contributions_at(share, idx, n, ones=ones),
                a.primary == f"share_{t:g}",
            )
            for t, share in zip(a.shares, means[1:])
        ]
        mean_fig = (
            "mean",
            f"mean {a.measure}",
            mean_contributions_at(item_scores, idx, n, ones=ones),
            a.primary == "mean",
        )
        # The primary figure first (Meme3W Stage 2 reports IoU@0.75 for regions, means otherwise).
        figures = [mean_fig, *share_figs] if a.primary == "mean" else [*share_figs, mean_fig]
    else:
        raise ValueError(f"field type {plan.type!r} declares an unknown agreement family {a.family!r}")
    if _overrides_extra(plan.ftype):
        rows_all = _rows(table, column, values, mask)
        figures += [(key, label, c, False) for key, label, c in plan.ftype.agreement_extra(plan.spec, rows_all, mask)]
    return _Pending(plan, table.item_ids, idx, item_scores, figures, extra)


def figure(
    key: str, label: str, estimate: Estimate | None, n: int, *, primary: bool, value: float | None = None
) -> dict:
    value = estimate.value if estimate is not None else value
    ci = [rnd(estimate.ci[0]), rnd(estimate.ci[1])] if estimate is not None and estimate.ci else None
    return {
        "key": key,
        "label": label,
        "value": rnd(value),
        "ci": ci,
        "n": n,
        "primary": primary,
        "resamples": estimate.resamples if ci is not None else 0,
    }


def _last_use(schema, plans: list[FieldPlan]) -> dict[str, int]:
    """Per field name: the index of the last plan whose figures read its column (the field
    itself, or a field in the chain of visible_if conditions of that plan)."""
    out: dict[str, int] = {}
    for i, plan in enumerate(plans):
        spec = plan.spec
        out[plan.name] = i
        while spec.get("visible_if") is not None:
            name = spec["visible_if"]["field"]
            out[name] = i
            spec = schema.by_name[name]
    return out


def agreement_figures(
    schema,
    units: list[Unit] | UnitTable,
    *,
    lexicon: dict | None,
    scope: str = DEFAULT_SCOPE,
    with_ci: bool = True,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    progress: Callable[[int, int], None] | None = None,
    release_table: bool = False,
) -> list[FieldResult]:
    """Every field's figures over ``units`` (each with two or more records). ``release_table``:
    the caller needs no column of ``units`` afterwards (UnitTable.release, before the bootstrap)."""
    plans = field_plans(schema)
    table = as_table(units)
    pending = []
    visibility: dict = {}
    seen: list = []  # scored rows shared by fields under one condition (_scored_rows)
    last_use = _last_use(schema, plans) if release_table else {}
    for i, plan in enumerate(plans):
        pending.append(_field(schema, plan, table, scope, lexicon, visibility, seen))
        for name in [n for n, at in last_use.items() if at == i]:
            table.drop(name)  # no later field reads it (its own figures, or as a condition)
        release_free_memory()  # each field's transient arrays (a ratings table, a one-hot matrix)
        if progress:
            progress(i + 1, len(plans) + 1)
    contributions = {(p.plan.name, key): c for p in pending for key, _, c, _ in p.figures}
    if release_table:
        table.release()
    # A caller short of memory (release_table) gets weight blocks of half the rows (the same
    # figures: metrics.resample's blocks only group the resamples): 8 MB less at 1M items.
    block = {"block": RELEASE_BLOCK} if release_table else {}
    estimates = bootstrap_figures(contributions, n=resamples, seed=seed, level=LEVEL, **block) if with_ci else {}
    release_free_memory()
    if progress:
        progress(len(plans) + 1, len(plans) + 1)
    results = []
    for p in pending:
        figs = []
        for key, label, c, primary in p.figures:
            est = estimates.get((p.plan.name, key))
            figs.append(
                figure(key, label, est, p.n_items, primary=primary, value=None if est is not None else c.point())
            )
        primary = next((c for _, _, c, is_primary in p.figures if is_primary), None)
        results.append(
            FieldResult(
                plan=p.plan,
                figures=figs,
                item_ids=p.item_ids,
                item_scores=np.asarray(p.item_scores, dtype=np.float64),
                extra=p.extra,
                unit_index=p.unit_index,
                primary_contributions=primary,
            )
        )
    return results


def field_result_dict(result: FieldResult, scope: str) -> dict:
    plan = result.plan
    return {
        "field": plan.name,
        "label": plan.label,
        "type": plan.type,
        "metric": plan.metric,
        "conditional": plan.conditional,
        "items": SCOPE_SHORT[scope] if plan.conditional else SCOPE_SHORT["all"],
        "n": len(result.item_ids),
        "figures": result.figures,
        **({"per_label_kappa": result.extra["per_label_kappa"]} if "per_label_kappa" in result.extra else {}),
    }


def headline(results: list[FieldResult]) -> list[dict]:
    """The primary figure of each target field (Meme3W Stage 2: 0.908 / 0.813 / 0.824 / 0.818)."""
    plans = target_plans([r.plan for r in results])
    out = []
    for r in results:
        if r.plan in plans and r.primary is not None:
            out.append(
                {
                    "field": r.plan.name,
                    "label": r.plan.label,
                    "metric": r.plan.agreement.label,
                    **{k: r.primary[k] for k in ("key", "value", "ci", "n")},
                }
            )
    return out


def slot_count(units: list[Unit] | UnitTable) -> int:
    if isinstance(units, UnitTable):
        return int(units.counts.max()) if len(units) else 0
    return max((len(u.values) for u in units), default=0)


# ---------------------------------------------------------------------------- against a reference

#: Reference scoring (audit, model re-scoring) scores a target field where the reference OR the
#: other record makes it applicable (issue: non-harmful items scored on target fields where
#: "absent = absent" counted 1.0 inflated Table 9), and non-conditional fields on all items.
REFERENCE_SCOPE = "either"


def reference_scores(
    schema, pairs: list[tuple[dict, dict]], item_ids: list[int], *, lexicon: dict | None, with_ci: bool = True
) -> list[FieldResult]:
    """Each field of ``(reference, other)`` records compared (audit: gold vs blind; models)."""
    units = [Unit(item_id=i, values=(ref, other), annotators=(0, 1)) for i, (ref, other) in zip(item_ids, pairs)]
    return agreement_figures(schema, units, lexicon=lexicon, scope=REFERENCE_SCOPE, with_ci=with_ci)


def table9(results: list[FieldResult]) -> dict:
    """Table 9 layout: the primary figure of each target field, its n, and their unweighted mean."""
    plans = target_plans([r.plan for r in results])
    rows = []
    for r in results:
        if r.plan in plans:
            p = r.primary
            rows.append(
                {
                    "field": r.plan.name,
                    "label": r.plan.label,
                    "metric": r.plan.agreement.label,
                    "value": p["value"] if p else None,
                    "ci": p["ci"] if p else None,
                    "n": len(r.item_ids),
                }
            )
    defined = [row["value"] for row in rows if row["value"] is not None]
    return {"rows": rows, "mean": rnd(sum(defined) / len(defined)) if defined and len(defined) == len(rows) else None}
