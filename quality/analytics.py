"""Dashboard analytics of the agreement data (no Django): agreement over time, confusion
matrices, similarity histograms and the items annotators disagreed on most."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import combinations

import numpy as np
import scipy.sparse as sp

from metrics.agreement import cohen_kappa
from metrics.resample import first_seen
from projects.fieldtypes import CATEGORICAL, CONTINUOUS
from quality.agreement import DIGITS, EPOCH, NO_TIME, FieldResult, Unit, UnitTable, as_table, field_plans, rnd

#: How an empty single-choice value is labelled in a confusion matrix.
NO_VALUE = "(none)"


def week_of(ts: datetime | None) -> str | None:
    if ts is None:
        return None
    year, week, _ = ts.isocalendar()
    return f"{year}-W{week:02d}"


_DAY_US = 86_400_000_000


def _weeks(units: list[Unit] | UnitTable) -> tuple[list[str], np.ndarray]:
    """The ISO weeks of the units' completion (sorted labels) and each unit's position among
    them (-1: undated). From a table's microseconds, one datetime per distinct day, not per
    unit (1M datetimes and their ISO calendars were ~2 s of a 1M-item report)."""
    micros = units.completed_micros if isinstance(units, UnitTable) else None
    if micros is None:
        completed = units.completed_at if isinstance(units, UnitTable) else [u.completed_at for u in units]
        labels = [week_of(ts) for ts in completed]
        weeks = sorted({w for w in labels if w})
        position = {w: i for i, w in enumerate(weeks)}
        return weeks, np.fromiter((position.get(w, -1) if w else -1 for w in labels), dtype=np.intp, count=len(units))
    dated = micros != NO_TIME
    days = np.where(dated, micros, 0) // _DAY_US  # floor: days since 1970-01-01 (UTC, as week_of's input)
    distinct, day_idx = np.unique(days[dated], return_inverse=True)
    labels = [week_of(EPOCH + timedelta(days=int(d))) for d in distinct.tolist()]
    weeks = sorted(set(labels))
    position = {w: i for i, w in enumerate(weeks)}
    week_idx = np.full(micros.size, -1, dtype=np.intp)
    week_idx[dated] = np.array([position[w] for w in labels], dtype=np.intp)[day_idx] if labels else []
    return weeks, week_idx


def agreement_over_time(results: list[FieldResult], units: list[Unit] | UnitTable) -> dict:
    """Primary figure per field per ISO week of item completion (no CIs: a trend line).

    Each week's figure is the field's statistic over that week's items: the weighted sum of the
    per-item contributions the report already computed (a week-indicator matrix times them),
    equal to recomputing the figure on the week's items (tests/test_agreement_scale.py) without
    re-reading a value (bench/scale.py: the per-week recompute cost as much as the report)."""
    weeks, week_idx = _weeks(units)
    series = []
    for res in results:
        plan, contrib = res.plan, res.primary_contributions
        scored = np.zeros(len(units), dtype=bool)
        if res.unit_index is not None:
            scored[res.unit_index] = True
        dated = week_idx >= 0
        counts = np.bincount(week_idx[scored & dated], minlength=len(weeks))
        values: list[float | None] = [None] * len(weeks)
        if contrib is not None and weeks:
            rows = np.nonzero(dated)[0]
            indicator = sp.csr_matrix(
                (np.ones(len(rows)), (week_idx[rows], rows)), shape=(len(weeks), len(units)), dtype=np.float64
            )
            sums = indicator @ contrib.matrix
            sums = np.asarray(sums.toarray() if sp.issparse(sums) else sums, dtype=np.float64)
            stats = np.asarray(contrib.statistic(sums), dtype=np.float64)
            values = [rnd(v) for v in stats]
        points = [
            {"week": w, "value": values[i] if counts[i] else None, "n": int(counts[i])} for i, w in enumerate(weeks)
        ]
        series.append({"field": plan.name, "label": plan.label, "metric": plan.agreement.label, "points": points})
    return {"weeks": weeks, "series": series}


def confusions(schema, units: list[Unit] | UnitTable, *, max_pairs: int = 4) -> list[dict]:
    """Confusion matrices of each single-choice field: all slot pairs pooled, then the
    annotator pairs that share the most items (rows: the earlier annotation of the pair)."""
    table = as_table(units)
    counts = table.counts
    # Units grouped by record width (in order of first appearance), then slot pairs (r, s),
    # r < s: the order the pooled pairs had when they were gathered unit by unit.
    widths = list(dict.fromkeys(counts.tolist()))
    groups = [(w, np.nonzero(counts == w)[0]) for w in widths]
    first = [table.annotators[g, r] for w, g in groups for r, _ in combinations(range(w), 2)]
    second = [table.annotators[g, s] for w, g in groups for _, s in combinations(range(w), 2)]
    out = []
    for plan in field_plans(schema):
        if plan.kind != CATEGORICAL:
            continue
        cats = [*plan.choices, None]
        column = table.column(plan.name)
        # Agreement values once per distinct stored value, merged when equal: codes of values.
        index: dict = {}
        code_value = np.fromiter(
            (index.setdefault(plan.ftype.agreement_value(plan.spec, v), len(index)) for v in column.raw),
            dtype=np.intp,
            count=len(column.raw),
        )
        values = list(index)
        codes = code_value[np.maximum(column.codes, 0)]
        pooled_a = _concat([codes[g, r] for w, g in groups for r, _ in combinations(range(w), 2)])
        pooled_b = _concat([codes[g, s] for w, g in groups for _, s in combinations(range(w), 2)])
        matrices = [{"pair": None, **_matrix_codes(pooled_a, pooled_b, values, cats)}]
        if first:
            x, y = np.concatenate(first), np.concatenate(second)
            lo, hi = np.minimum(x, y), np.maximum(x, y)
            pairs, n_shared = _pair_counts(lo, hi)
            ranked = sorted(zip(n_shared.tolist(), map(tuple, pairs.tolist())), key=lambda t: (-t[0], t[1]))
            flip = x > y
            for _, (p, q) in ranked[:max_pairs]:
                where = np.nonzero((lo == p) & (hi == q))[0]
                a = np.where(flip[where], pooled_b[where], pooled_a[where])
                b = np.where(flip[where], pooled_a[where], pooled_b[where])
                matrices.append({"pair": [int(p), int(q)], **_matrix_codes(a, b, values, cats)})
        out.append(
            {
                "field": plan.name,
                "label": plan.label,
                "categories": [c if c is not None else NO_VALUE for c in cats],
                "matrices": matrices,
            }
        )
    return out


def _pair_counts(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(np.stack([lo, hi], axis=1), axis=0, return_counts=True)`` for ids >= 0:
    through one int64 key per pair while the ids allow it (a row-wise unique of 3M annotator
    pairs was ~3 s of a 1M-item AHA report, bench/scale.py; a 1-D sort is a tenth of that)."""
    top = int(max(lo.max(), hi.max())) + 1 if lo.size else 1
    if lo.size == 0 or min(int(lo.min()), int(hi.min())) < 0 or top > np.iinfo(np.int32).max:
        return np.unique(np.stack([lo, hi], axis=1), axis=0, return_counts=True)
    keys, counts = np.unique(lo.astype(np.int64) * top + hi, return_counts=True)
    return np.stack([keys // top, keys % top], axis=1), counts


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.intp)


def _matrix_codes(a: np.ndarray, b: np.ndarray, values: list, cats: list) -> dict:
    """The confusion matrix over ``cats`` (values outside them count in n and kappa, not in
    the grid) and Cohen's kappa of ``[values[c] for c in a]`` and ``b``, from the codes: the categories
    renumbered in first-seen order over ``a`` then ``b`` (metrics.agreement's order), so that
    kappa is computed on the same confusion matrix, cell for cell."""
    if not a.size:
        return {"n": 0, "counts": [[0] * len(cats) for _ in cats], "kappa": None}
    both = np.concatenate([a, b])
    used = first_seen(both)
    rank = np.zeros(int(used.max()) + 1, dtype=np.intp)
    rank[used] = np.arange(used.size)
    pos = {c: i for i, c in enumerate(cats)}
    cell = np.full(rank.size, -1, dtype=np.intp)  # code -> its row in the grid (-1: not a category)
    cell[used] = [pos.get(values[c], -1) for c in used.tolist()]
    ca, cb = cell[a], cell[b]
    ok = (ca >= 0) & (cb >= 0)
    grid = np.bincount(ca[ok] * len(cats) + cb[ok], minlength=len(cats) ** 2).reshape(len(cats), len(cats))
    return {"n": int(a.size), "counts": grid.tolist(), "kappa": rnd(cohen_kappa(rank[a], rank[b]))}


HIST_BINS = 10


def histograms(results: list[FieldResult]) -> list[dict]:
    """Distribution of the per-item pair similarity of each continuous field (10 bins on [0, 1])."""
    out = []
    for r in results:
        if r.plan.kind != CONTINUOUS:
            continue
        counts, _ = np.histogram(np.clip(r.item_scores, 0.0, 1.0), bins=HIST_BINS, range=(0.0, 1.0))
        out.append(
            {
                "field": r.plan.name,
                "label": r.plan.label,
                "measure": r.plan.agreement.measure,
                "counts": [int(c) for c in counts],
                "n": int(r.item_scores.size),
                "threshold": r.plan.agreement.shares[0] if r.plan.agreement.shares else None,
            }
        )
    return out


def worst_items(results: list[FieldResult], *, limit: int = 15) -> list[dict]:
    """Items with the lowest mean per-field similarity over the fields they were scored on
    (mean and order on the rounded mean, then the item id; numpy over all items, dicts only for
    the ``limit`` shown)."""
    scored = [r for r in results if len(r.item_ids)]
    if not scored:
        return []
    ids = np.concatenate([np.asarray(r.item_ids, dtype=np.int64) for r in scored])
    scores = np.concatenate([np.asarray(r.item_scores, dtype=np.float64) for r in scored])
    unique, inverse = np.unique(ids, return_inverse=True)
    mean = np.bincount(inverse, weights=scores) / np.bincount(inverse)
    keep = np.nonzero(mean < 1.0)[0]
    rounded = np.round(mean[keep], DIGITS)
    top = keep[np.lexsort((unique[keep], rounded))[:limit]]
    rows = []
    for u in top:
        item_id = int(unique[u])
        fields = {}
        for r in scored:
            pos = np.nonzero(np.asarray(r.item_ids) == item_id)[0]
            if pos.size and float(r.item_scores[pos[0]]) < 1.0:
                fields[r.plan.name] = rnd(float(r.item_scores[pos[0]]))
        rows.append({"item_id": item_id, "score": rnd(float(mean[u])), "fields": fields})
    return rows
