"""Agreement computations for the quality reports, driven by the schema's field types.

No Django here: plain values in, JSON-ready dicts out. Every formula comes from ``metrics/``
(kappa, alpha, F1, IoU, bootstrap CIs); this module only decides *which* values are compared
and *over which items*, and packages the figures with their n and CI (SPEC section 3).

Raters are *slots*: for each item, its submitted annotations ordered by first submission.
Slot 1 of one item and slot 1 of another are usually different people (five annotators share
the work, two per item), which is the usual reading of "Cohen's kappa between the two
annotations" in crowd-style pipelines (Meme3W Stage 2). With more than two slots, every slot
pair is scored and averaged, plus Krippendorff's alpha (which handles missing slots natively).

Which field type gets which figures is decided by the type's ``metric`` attribute
(projects.fieldtypes), never by preset:

=====================  =============================================================
metric                 figures (primary first)
=====================  =============================================================
cohen_kappa            Cohen's kappa (kappa_ci), observed agreement; >2 slots: mean
                       pairwise kappa + Krippendorff's alpha (nominal)
macro_pairwise_kappa   per-label binary kappa macro-averaged over labels and slot pairs
                       (AHA 3.4), exact-set agreement; >2 slots: + mean per-label alpha
f1_rel                 mean F1_rel with the project lexicon, share >= 0.7
token_f1               mean token-F1, share >= 0.7
enclosing_iou          share IoU >= 0.75 (the paper's IoU@0.75), share >= 0.5, mean IoU
=====================  =============================================================

Bootstrap: ``kappa_ci`` and ``mean_ci`` with 10,000 resamples (Meme3W B.5); statistics
without a closed-form resampler (mean pairwise kappa, macro kappa, alpha) get a percentile
bootstrap over items with ``GENERIC_BOOTSTRAP_N`` resamples, recomputing the same metrics/
function on each resample. Seeds are fixed: same data, same figures, byte for byte.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations
from typing import Any

import numpy as np

from metrics.agreement import cohen_kappa, confusion_matrix, kappa_ci, krippendorff_alpha, macro_pairwise_kappa
from metrics.bootstrap import mean_ci
from projects.fieldtypes import CATEGORICAL, CONTINUOUS, MULTILABEL, Agreement, FieldType

#: Bump when the meaning of a stored report changes: cached rows of older versions are ignored.
REPORT_VERSION = 3
BOOTSTRAP_N = 10_000
GENERIC_BOOTSTRAP_N = 1_000
#: The generic bootstrap recomputes a metrics/ function per resample, in Python: its cost is
#: about resamples x rated values. Above this many value-visits per figure the number of
#: resamples goes down (deterministically, from the data's shape, never below the minimum),
#: so an AHA-size project's report stays within a minute or two of worker time.
GENERIC_BUDGET = 20_000_000
GENERIC_MIN = 200
SEED = 0
DIGITS = 6
#: Stand-in for "no value" of a single-choice field inside Krippendorff's alpha, where None
#: means "this slot did not rate the item" (metrics.agreement docstring).
NO_VALUE = "(none)"

# Reporting thresholds are the paper's (Stage 2 and Table 1), declared by each field type
# (projects.fieldtypes Agreement.shares), fixed so that reports stay comparable across
# projects; the project's *routing* thresholds do not change them.

SCOPES = {
    "both": "items where every annotator's record makes the field applicable (e.g. both marked the meme "
            "harmful): field-specific agreement, as in Meme3W Stage 2; a harmfulness disagreement is measured "
            "once, by the label figure, not again in every target field",
    "either": "items where at least one annotator's record makes the field applicable (e.g. at least one marked "
              "the meme harmful): a harmful/non-harmful disagreement also counts against every target field",
    "all": "all items with two or more submitted annotations (pairs of absent values count as agreement)",
}
DEFAULT_SCOPE = "both"
SCOPE_SHORT = {
    "both": "items where every annotator made this field applicable (e.g. all marked the meme harmful)",
    "either": "items where at least one annotator made this field applicable (e.g. one marked harmful)",
    "all": "all items with two or more submitted annotations",
}


def rnd(x: float | None) -> float | None:
    return None if x is None else round(float(x), DIGITS)


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
        plans.append(FieldPlan(
            name=spec["name"], label=spec.get("label") or spec["name"], type=spec["type"],
            metric=ftype.agreement.metric, kind=ftype.agreement.family, conditional=spec.get("visible_if") is not None,
            choices=tuple(spec.get("choices", ())), spec=spec, ftype=ftype,
        ))
    return plans


def target_plans(plans: list[FieldPlan]) -> list[FieldPlan]:
    """The fields of Table 9: the conditional (target) fields, or every field if none is conditional."""
    cond = [p for p in plans if p.conditional]
    return cond or list(plans)


# ---------------------------------------------------------------------------- value shapes

def _shape(plan: FieldPlan, v: Any) -> Any:
    return plan.ftype.agreement_value(plan.spec, v)


def pair_scores(plan: FieldPlan, a: Sequence[Any], b: Sequence[Any], *, lexicon: dict | None) -> np.ndarray:
    """Per-pair similarity of already-shaped values with the field type's metric (batch forms)."""
    return plan.ftype.pair_scores(plan.spec, a, b, lexicon=lexicon)


# ---------------------------------------------------------------------------- bootstrap helpers

def _ci_pair(ci) -> list[float] | None:
    return None if ci is None else [rnd(ci[0]), rnd(ci[1])]


def mean_with_ci(scores: Sequence[float] | np.ndarray, *, with_ci: bool = True) -> tuple[float | None, list | None]:
    arr = np.asarray(scores, dtype=np.float64)
    if arr.size == 0:
        return None, None
    value = float(arr.mean())
    return value, (_ci_pair(mean_ci(arr, n=BOOTSTRAP_N, seed=SEED)) if with_ci else None)


def generic_resamples(work: int) -> int:
    """Resamples of the generic bootstrap for a statistic visiting ``work`` values per call."""
    return max(GENERIC_MIN, min(GENERIC_BOOTSTRAP_N, GENERIC_BUDGET // max(1, work)))


def bootstrap_statistic(stat: Callable[[np.ndarray], float | None], n_items: int, *, n: int | None = None,
                        seed: int = SEED, level: float = 0.95) -> list[float] | None:
    """Percentile CI of ``stat(indices)`` over item resamples (undefined resamples dropped)."""
    if n_items == 0:
        return None
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n or GENERIC_BOOTSTRAP_N):
        v = stat(rng.integers(0, n_items, size=n_items))
        if v is not None and np.isfinite(v):
            values.append(v)
    if not values:
        return None
    tail = (1.0 - level) / 2.0
    low, high = np.percentile(values, [100.0 * tail, 100.0 * (1.0 - tail)])
    return [rnd(low), rnd(high)]


def figure(key: str, label: str, value: float | None, ci, n: int, *, primary: bool = False,
           resamples: int = BOOTSTRAP_N) -> dict:
    return {"key": key, "label": label, "value": rnd(value), "ci": ci, "n": n, "primary": primary,
            "resamples": resamples if ci is not None else 0}


# ---------------------------------------------------------------------------- one field

@dataclass
class FieldResult:
    plan: FieldPlan
    figures: list[dict]
    item_ids: list[int]
    #: per item, mean pair similarity (1 = all slots agree); same order as item_ids
    item_scores: np.ndarray
    extra: dict = field(default_factory=dict)

    @property
    def primary(self) -> dict | None:
        return next((f for f in self.figures if f["primary"]), None)


def _slot_matrix(rows: list[list[Any]], width: int, missing: Any = None) -> list[list[Any]]:
    """rows[i] = values of item i by slot -> [slot][item], ``missing`` where a slot is empty."""
    return [[r[s] if s < len(r) else missing for r in rows] for s in range(width)]


def _pairs_present(rows: list[list[Any]], r: int, s: int) -> list[int]:
    return [i for i, row in enumerate(rows) if len(row) > max(r, s)]


def _item_pair_means(plan: FieldPlan, rows: list[list[Any]], lexicon) -> np.ndarray:
    """Mean similarity over the slot pairs of each item (vectorized over all pairs at once)."""
    left, right, owner = [], [], []
    for i, row in enumerate(rows):
        for r, s in combinations(range(len(row)), 2):
            left.append(row[r])
            right.append(row[s])
            owner.append(i)
    scores = pair_scores(plan, left, right, lexicon=lexicon) if left else np.zeros(0)
    sums = np.bincount(np.asarray(owner, dtype=np.intp), weights=scores, minlength=len(rows)) if owner else np.zeros(len(rows))
    counts = np.bincount(np.asarray(owner, dtype=np.intp), minlength=len(rows)) if owner else np.ones(len(rows))
    return sums / np.maximum(counts, 1)


def field_agreement(plan: FieldPlan, rows: list[list[Any]], item_ids: list[int], *, lexicon: dict | None,
                    with_ci: bool = True) -> FieldResult:
    """Agreement figures of one field over items; ``rows[i]`` = item i's raw values by slot (>= 2)."""
    shaped = [[_shape(plan, v) for v in row] for row in rows]
    n = len(shaped)
    width = max((len(r) for r in shaped), default=0)
    item_scores = _item_pair_means(plan, shaped, lexicon) if n else np.zeros(0)
    figures: list[dict] = []
    extra: dict = {}
    if plan.kind == CATEGORICAL:
        figures += _categorical(plan, shaped, width, with_ci)
        agree, agree_ci = mean_with_ci(item_scores, with_ci=with_ci)
        figures.append(figure("agreement", "observed agreement", agree, agree_ci, n))
    elif plan.kind == MULTILABEL:
        figures += _multilabel(plan, shaped, width, with_ci, extra)
        exact, exact_ci = mean_with_ci(item_scores, with_ci=with_ci)
        figures.append(figure("exact", "identical label sets", exact, exact_ci, n))
    else:
        figures += _continuous(plan, shaped, lexicon, item_scores, with_ci)
    return FieldResult(plan=plan, figures=figures, item_ids=list(item_ids), item_scores=item_scores, extra=extra)


def _categorical(plan: FieldPlan, rows: list[list[Any]], width: int, with_ci: bool) -> list[dict]:
    n = len(rows)
    if width < 2:
        return [figure("kappa", "Cohen's κ", None, None, n, primary=True)]
    if width == 2:
        a, b = [r[0] for r in rows], [r[1] for r in rows]
        value = cohen_kappa(a, b)
        ci = _ci_pair(kappa_ci(a, b, n=BOOTSTRAP_N, seed=SEED)) if with_ci and value is not None else None
        return [figure("kappa", "Cohen's κ", value, ci, n, primary=True)]
    arr = np.empty(n, dtype=object)
    arr[:] = rows

    def mean_pair_kappa(idx: np.ndarray) -> float | None:
        sample = arr[idx]
        ks = []
        for r, s in combinations(range(width), 2):
            both = [row for row in sample if len(row) > s]
            k = cohen_kappa([row[r] for row in both], [row[s] for row in both]) if both else None
            if k is not None:
                ks.append(k)
        return float(np.mean(ks)) if ks else None

    def alpha(idx: np.ndarray) -> float | None:
        sample = arr[idx]
        data = [[(row[s] if row[s] is not None else NO_VALUE) if s < len(row) else None for row in sample]
                for s in range(width)]
        return krippendorff_alpha(data, "nominal")

    everything = np.arange(n)
    k = mean_pair_kappa(everything)
    a = alpha(everything)
    reps = generic_resamples(n * width)
    return [
        figure("kappa", "mean pairwise Cohen's κ", k,
               bootstrap_statistic(mean_pair_kappa, n, n=reps) if with_ci and k is not None else None, n,
               primary=True, resamples=reps),
        figure("alpha", "Krippendorff's α (nominal)", a,
               bootstrap_statistic(alpha, n, n=reps) if with_ci and a is not None else None, n, resamples=reps),
    ]


def _multilabel(plan: FieldPlan, rows: list[list[Any]], width: int, with_ci: bool, extra: dict) -> list[dict]:
    n = len(rows)
    labels = list(plan.choices)
    if width < 2 or not labels:
        return [figure("kappa", "macro pairwise κ", None, None, n, primary=True)]
    arr = np.empty(n, dtype=object)
    arr[:] = rows

    def by_slot(idx: np.ndarray) -> list[list[Any]]:
        return _slot_matrix(list(arr[idx]), width)

    def macro(idx: np.ndarray) -> float | None:
        return macro_pairwise_kappa(by_slot(idx), labels)

    everything = np.arange(n)
    value = macro(everything)
    reps = generic_resamples(n * width * 2)
    out = [figure("kappa", "per-label κ, macro over labels and annotator pairs", value,
                  bootstrap_statistic(macro, n, n=reps) if with_ci and value is not None else None, n,
                  primary=True, resamples=reps)]
    slots = by_slot(everything)
    extra["per_label_kappa"] = {label: rnd(macro_pairwise_kappa(slots, [label])) for label in labels}
    if width > 2:
        def mean_alpha(idx: np.ndarray) -> float | None:
            data = by_slot(idx)
            alphas = []
            for label in labels:
                binary = [[None if v is None else int(label in v) for v in slot] for slot in data]
                x = krippendorff_alpha(binary, "nominal")
                if x is not None:
                    alphas.append(x)
            return float(np.mean(alphas)) if alphas else None

        a = mean_alpha(everything)
        reps_alpha = generic_resamples(n * width * len(labels))
        out.append(figure("alpha", "Krippendorff's α (binary per label, mean over labels)", a,
                          bootstrap_statistic(mean_alpha, n, n=reps_alpha) if with_ci and a is not None else None, n,
                          resamples=reps_alpha))
    return out


def _continuous(plan: FieldPlan, rows, lexicon, item_scores: np.ndarray, with_ci: bool) -> list[dict]:
    n = len(rows)
    agreement = plan.agreement
    name = agreement.measure
    mean, mean_ci_ = mean_with_ci(item_scores, with_ci=with_ci)
    share_figs = []
    for t in agreement.shares:
        # Per item: the share of slot pairs at or above t (0/1 with two annotators).
        per_item = _share_per_item(plan, rows, lexicon, t) if any(len(r) > 2 for r in rows) else (item_scores >= t)
        value, ci = mean_with_ci(np.asarray(per_item, dtype=np.float64), with_ci=with_ci)
        share_figs.append(figure(f"share_{t:g}", f"share {name} ≥ {t:g}", value, ci, n,
                                 primary=agreement.primary == f"share_{t:g}"))
    mean_fig = figure("mean", f"mean {name}", mean, mean_ci_, n, primary=agreement.primary == "mean")
    # The primary figure first (Meme3W Stage 2 reports IoU@0.75 for regions, means otherwise).
    return share_figs + [mean_fig] if agreement.primary != "mean" else [mean_fig] + share_figs


def _share_per_item(plan: FieldPlan, rows, lexicon, t: float) -> np.ndarray:
    left, right, owner = [], [], []
    for i, row in enumerate(rows):
        for r, s in combinations(range(len(row)), 2):
            left.append(row[r])
            right.append(row[s])
            owner.append(i)
    hits = (pair_scores(plan, left, right, lexicon=lexicon) >= t).astype(np.float64)
    own = np.asarray(owner, dtype=np.intp)
    return np.bincount(own, weights=hits, minlength=len(rows)) / np.maximum(np.bincount(own, minlength=len(rows)), 1)


# ---------------------------------------------------------------------------- a whole report

@dataclass(frozen=True)
class Unit:
    """One item's submitted annotations, by slot (ordered by first submission)."""

    item_id: int
    values: tuple[dict, ...]
    annotators: tuple[int, ...]
    completed_at: datetime | None = None


def in_scope(schema, plan: FieldPlan, unit: Unit, scope: str) -> bool:
    if not plan.conditional or scope == "all":
        return True
    visible = [schema.is_visible(plan.spec, v) for v in unit.values]
    return all(visible) if scope == "both" else any(visible)


def _rows(plan: FieldPlan, units: list[Unit]) -> list[list[Any]]:
    return [[v.get(plan.name) for v in u.values] for u in units]


def agreement_figures(schema, units: list[Unit], *, lexicon: dict | None, scope: str = DEFAULT_SCOPE,
                      with_ci: bool = True, progress: Callable[[int, int], None] | None = None) -> list[FieldResult]:
    plans = field_plans(schema)
    results = []
    for i, plan in enumerate(plans):
        chosen = [u for u in units if in_scope(schema, plan, u, scope)]
        results.append(field_agreement(plan, _rows(plan, chosen), [u.item_id for u in chosen], lexicon=lexicon,
                                       with_ci=with_ci))
        if progress:
            progress(i + 1, len(plans))
    return results


def field_result_dict(result: FieldResult, schema, scope: str) -> dict:
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
            out.append({"field": r.plan.name, "label": r.plan.label, "metric": r.plan.agreement.label,
                        **{k: r.primary[k] for k in ("key", "value", "ci", "n")}})
    return out


def slot_count(units: list[Unit]) -> int:
    return max((len(u.values) for u in units), default=0)


# ---------------------------------------------------------------------------- dashboard analytics

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
    series = []
    for plan in field_plans(schema):
        points = []
        for w in weeks:
            chosen = [u for u in by_week[w] if in_scope(schema, plan, u, scope)]
            res = field_agreement(plan, _rows(plan, chosen), [u.item_id for u in chosen], lexicon=lexicon, with_ci=False)
            p = res.primary
            points.append({"week": w, "value": p["value"] if p else None, "n": len(chosen)})
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
            vals = [_shape(plan, v.get(plan.name)) for v in u.values]
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
        out.append({"field": plan.name, "label": plan.label, "categories": [c if c is not None else NO_VALUE for c in cats],
                    "matrices": matrices})
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
        out.append({"field": r.plan.name, "label": r.plan.label, "measure": r.plan.agreement.measure,
                    "counts": [int(c) for c in counts], "n": int(r.item_scores.size),
                    "threshold": r.plan.agreement.shares[0] if r.plan.agreement.shares else None})
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
            rows.append({"item_id": item_id, "score": rnd(mean),
                         "fields": {k: rnd(v) for k, v in scores.items() if v < 1.0}})
    rows.sort(key=lambda r: (r["score"], r["item_id"]))
    return rows[:limit]


# ---------------------------------------------------------------------------- against a reference

def reference_scores(schema, pairs: list[tuple[dict, dict]], item_ids: list[int], *, lexicon: dict | None,
                     with_ci: bool = True) -> list[FieldResult]:
    """Each field of ``(reference, other)`` records compared over all given items (audit, models)."""
    rows_by_plan = []
    for plan in field_plans(schema):
        rows = [[ref.get(plan.name), other.get(plan.name)] for ref, other in pairs]
        rows_by_plan.append(field_agreement(plan, rows, item_ids, lexicon=lexicon, with_ci=with_ci))
    return rows_by_plan


def table9(results: list[FieldResult]) -> dict:
    """Table 9 layout: the primary figure of each target field and their unweighted mean."""
    plans = target_plans([r.plan for r in results])
    rows = []
    for r in results:
        if r.plan in plans:
            p = r.primary
            rows.append({"field": r.plan.name, "label": r.plan.label, "metric": r.plan.agreement.label,
                         "value": p["value"] if p else None, "ci": p["ci"] if p else None, "n": p["n"] if p else 0})
    defined = [row["value"] for row in rows if row["value"] is not None]
    return {"rows": rows, "mean": rnd(sum(defined) / len(defined)) if defined and len(defined) == len(rows) else None}
