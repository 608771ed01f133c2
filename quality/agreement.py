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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations
from typing import Any

import numpy as np

from metrics.resample import (
    Contributions,
    Estimate,
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


def _condition_key(schema, spec: dict) -> str:
    """The chain of visible_if conditions a field depends on (fields sharing it share the answer)."""
    chain = []
    while spec.get("visible_if") is not None:
        chain.append(spec["visible_if"])
        spec = schema.by_name[spec["visible_if"]["field"]]
    return json.dumps(chain, sort_keys=True, default=str)


def _visibility(schema, spec: dict, units: list[Unit], cache: dict) -> list[tuple[bool, ...]] | None:
    """Per unit, per record: is the field visible (Schema.is_visible), computed once per distinct
    chain of conditions for all units (Meme3W's four target fields share one). None: always."""
    cond = spec.get("visible_if")
    if cond is None:
        return None
    key = _condition_key(schema, spec)
    if key not in cache:
        parent = _visibility(schema, schema.by_name[cond["field"]], units, cache)
        name, allowed = cond["field"], cond["in"]
        if parent is None:
            cache[key] = [tuple(v.get(name) in allowed for v in u.values) for u in units]
        else:
            cache[key] = [
                tuple(p and v.get(name) in allowed for p, v in zip(pu, u.values)) for pu, u in zip(parent, units)
            ]
    return cache[key]


def scope_mask(schema, plan: FieldPlan, units: list[Unit], scope: str, cache: dict | None = None) -> np.ndarray:
    """Per unit: is the field scored on it under ``scope`` (every record, or at least one, makes it
    visible), for all units at once (bench/scale.py: a per-unit test cost ~30% of a report)."""
    n = len(units)
    if not plan.conditional or scope == "all":
        return np.ones(n, dtype=bool)
    visible = _visibility(schema, plan.spec, units, {} if cache is None else cache)
    test = all if scope == "both" else any
    return np.fromiter((test(v) for v in visible), dtype=bool, count=n)


@dataclass
class FieldResult:
    plan: FieldPlan
    figures: list[dict]
    item_ids: list[int]
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


def _pair_means(plan: FieldPlan, rows: list[list[Any]], lexicon, threshold: float | None = None) -> np.ndarray:
    """Per item: mean over its pairs of records of the pair similarity (or of similarity >=
    threshold), all pairs of all items scored in one batch call of the type."""
    if rows and all(len(row) == 2 for row in rows):  # the common case: one pair per item
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


@dataclass
class _Pending:
    """A field's figures before the shared bootstrap: (key, label, contributions, primary)."""

    plan: FieldPlan
    item_ids: list[int]
    item_scores: np.ndarray
    figures: list[tuple[str, str, Contributions, bool]]
    extra: dict
    unit_index: np.ndarray


def _rater_items(rows: list[list[Any]], raters: list[tuple], mask: np.ndarray) -> list[dict]:
    """{rater: value} per item (empty outside the mask: the item contributes nothing)."""
    return [dict(zip(r, row)) if m else {} for row, r, m in zip(rows, raters, mask)]


def _field(schema, plan: FieldPlan, units: list[Unit], scope: str, lexicon, cache: dict | None = None) -> _Pending:
    mask = scope_mask(schema, plan, units, scope, cache)
    # Values of the items in scope only (the others contribute nothing to any figure).
    value, spec, name = plan.ftype.agreement_value, plan.spec, plan.name
    rows_all = [[value(spec, v.get(name)) for v in u.values] if m else [] for u, m in zip(units, mask)]
    width = max((len(u.values) for u, m in zip(units, mask) if m), default=0)
    # Two records per item: the two annotations (slots). More: people (see the module docstring).
    raters = [tuple(u.annotators) if width > 2 else tuple(range(len(u.values))) for u in units]
    idx = np.nonzero(mask)[0]
    rows = [rows_all[i] for i in idx]
    item_ids = [units[i].item_id for i in idx]
    item_scores = _pair_means(plan, rows, lexicon)
    scores_all = np.zeros(len(units))
    scores_all[idx] = item_scores
    a = plan.agreement
    figures: list[tuple[str, str, Contributions, bool]] = []
    extra: dict = {}
    if a.family == CATEGORICAL:
        ratings = Ratings.from_items(_rater_items(rows_all, raters, mask))
        label = "Cohen's κ" if width <= 2 else "mean Cohen's κ over annotator pairs"
        figures.append(("kappa", label, pairwise_kappa_contributions(ratings, mask), True))
        if width > 2:
            figures.append(("alpha", "Krippendorff's α (nominal)", alpha_contributions(ratings, mask), False))
        figures.append(("agreement", "observed agreement", mean_contributions(scores_all, mask), False))
    elif a.family == MULTILABEL:
        labels = list(plan.choices)
        ratings = LabelRatings.from_items(_rater_items(rows_all, raters, mask), labels)
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
        figures.append(("exact", "identical label sets", mean_contributions(scores_all, mask), False))
        extra["per_label_kappa"] = (
            {x: rnd(k) for x, k in zip(ratings.labels, per_label_kappas(macro))} if ratings.rater_ids else {}
        )
    elif a.family == CONTINUOUS:
        share_figs = []
        one_pair = bool(rows) and all(len(r) == 2 for r in rows)  # then the share is of the one pair's score
        for t in a.shares:
            per_item = np.zeros(len(units))
            per_item[idx] = (item_scores >= t) if one_pair else _pair_means(plan, rows, lexicon, threshold=t)
            share_figs.append(
                (
                    f"share_{t:g}",
                    f"share {a.measure} ≥ {t:g}",
                    mean_contributions(per_item, mask),
                    a.primary == f"share_{t:g}",
                )
            )
        mean_fig = ("mean", f"mean {a.measure}", mean_contributions(scores_all, mask), a.primary == "mean")
        # The primary figure first (Meme3W Stage 2 reports IoU@0.75 for regions, means otherwise).
        figures = [mean_fig, *share_figs] if a.primary == "mean" else [*share_figs, mean_fig]
    else:
        raise ValueError(f"field type {plan.type!r} declares an unknown agreement family {a.family!r}")
    figures += [(key, label, c, False) for key, label, c in plan.ftype.agreement_extra(plan.spec, rows_all, mask)]
    return _Pending(plan, item_ids, item_scores, figures, extra, idx)


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


def agreement_figures(
    schema,
    units: list[Unit],
    *,
    lexicon: dict | None,
    scope: str = DEFAULT_SCOPE,
    with_ci: bool = True,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    progress: Callable[[int, int], None] | None = None,
) -> list[FieldResult]:
    """Every field's figures over ``units`` (each with two or more records)."""
    plans = field_plans(schema)
    pending = []
    visibility: dict = {}
    for i, plan in enumerate(plans):
        pending.append(_field(schema, plan, units, scope, lexicon, visibility))
        if progress:
            progress(i + 1, len(plans) + 1)
    contributions = {(p.plan.name, key): c for p in pending for key, _, c, _ in p.figures}
    estimates = bootstrap_figures(contributions, n=resamples, seed=seed, level=LEVEL) if with_ci else {}
    if progress:
        progress(len(plans) + 1, len(plans) + 1)
    results = []
    for p in pending:
        figs = []
        for key, label, c, primary in p.figures:
            est = estimates.get((p.plan.name, key))
            figs.append(
                figure(key, label, est, len(p.item_ids), primary=primary, value=None if est is not None else c.point())
            )
        primary = next((c for _, _, c, is_primary in p.figures if is_primary), None)
        results.append(
            FieldResult(
                plan=p.plan,
                figures=figs,
                item_ids=p.item_ids,
                item_scores=p.item_scores,
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


def slot_count(units: list[Unit]) -> int:
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
