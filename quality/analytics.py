"""Dashboard analytics of the agreement data (no Django): agreement over time, confusion
matrices, similarity histograms and the items annotators disagreed on most."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from itertools import combinations

import numpy as np

from metrics.agreement import cohen_kappa, confusion_matrix
from projects.fieldtypes import CATEGORICAL, CONTINUOUS
from quality.agreement import FieldResult, Unit, agreement_figures, field_plans, rnd

#: How an empty single-choice value is labelled in a confusion matrix.
NO_VALUE = "(none)"


def week_of(ts: datetime | None) -> str | None:
    if ts is None:
        return None
    year, week, _ = ts.isocalendar()
    return f"{year}-W{week:02d}"


def agreement_over_time(schema, units: list[Unit], *, lexicon, scope: str) -> dict:
    """Primary figure per field per ISO week of item completion (no CIs: a trend line)."""
    by_week: dict[str, list[Unit]] = defaultdict(list)
    for u in units:
        w = week_of(u.completed_at)
        if w:
            by_week[w].append(u)
    weeks = sorted(by_week)
    per_week = {w: agreement_figures(schema, by_week[w], lexicon=lexicon, scope=scope, with_ci=False) for w in weeks}
    series = []
    for plan in field_plans(schema):
        points = []
        for w in weeks:
            res = next(r for r in per_week[w] if r.plan.name == plan.name)
            p = res.primary
            points.append({"week": w, "value": p["value"] if p else None, "n": len(res.item_ids)})
        series.append({"field": plan.name, "label": plan.label, "metric": plan.agreement.label, "points": points})
    return {"weeks": weeks, "series": series}


def confusions(schema, units: list[Unit], *, max_pairs: int = 4) -> list[dict]:
    """Confusion matrices of each single-choice field: all slot pairs pooled, then the
    annotator pairs that share the most items (rows: the earlier annotation of the pair)."""
    out = []
    for plan in field_plans(schema):
        if plan.kind != CATEGORICAL:
            continue
        cats = [*plan.choices, None]
        pooled_a, pooled_b = [], []
        per_pair: dict[tuple[int, int], tuple[list, list]] = defaultdict(lambda: ([], []))
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
        out.append(
            {
                "field": plan.name,
                "label": plan.label,
                "categories": [c if c is not None else NO_VALUE for c in cats],
                "matrices": matrices,
            }
        )
    return out


def _matrix(a: list, b: list, cats: list) -> dict:
    grid = [[0] * len(cats) for _ in cats]
    if a:
        cm, seen = confusion_matrix(a, b)
        pos = {c: i for i, c in enumerate(cats)}
        for i, ci_ in enumerate(seen):
            for j, cj in enumerate(seen):
                if ci_ in pos and cj in pos:
                    grid[pos[ci_]][pos[cj]] += int(cm[i, j])
    return {"n": len(a), "counts": grid, "kappa": rnd(cohen_kappa(a, b)) if a else None}


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
    """Items with the lowest mean per-field similarity over the fields they were scored on."""
    per_item: dict[int, dict[str, float]] = defaultdict(dict)
    for r in results:
        for item_id, score in zip(r.item_ids, r.item_scores):
            per_item[item_id][r.plan.name] = float(score)
    rows = []
    for item_id, scores in per_item.items():
        mean = sum(scores.values()) / len(scores)
        if mean < 1.0:
            rows.append(
                {"item_id": item_id, "score": rnd(mean), "fields": {k: rnd(v) for k, v in scores.items() if v < 1.0}}
            )
    rows.sort(key=lambda r: (r["score"], r["item_id"]))
    return rows[:limit]
