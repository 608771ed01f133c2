"""Each hidden candidate model scored against reference records (gold, blind annotations):
the Table 1 columns and JRA for schemas with the five Meme3W fields, else the primary figure of
each target field. Holds model identities: leads and researchers only (SPEC section 4)."""

from __future__ import annotations

from candidates.models import Candidate
from metrics.records import FIELDS, field_scores, jra_scores
from metrics.resample import bootstrap_figures, mean_contributions
from quality import agreement


def _latest_candidates(*, item_ids: list[int]) -> tuple[dict[tuple[int, int], dict], dict[int, dict]]:
    """({(item id, provider id): fields} of the newest successful candidate per provider,
    {provider id: {name, model}}) in one query."""
    latest: dict[tuple[int, int], dict] = {}
    providers: dict[int, dict] = {}
    rows = (
        Candidate.objects.filter(item_id__in=item_ids, parse_error="")
        .order_by("item_id", "provider_id", "-created_at", "-id")
        .values_list("item_id", "provider_id", "fields", "provider__name", "model_name")
    )
    for item_id, provider_id, fields, name, model in rows:
        if (item_id, provider_id) not in latest:
            latest[(item_id, provider_id)] = fields or {}
            providers.setdefault(provider_id, {"name": name, "model": model})
    return latest, providers


def _uses_record_metrics(schema) -> bool:
    return set(FIELDS) <= set(schema.names)


def _rank(values: dict[str, float | None]) -> dict[str, int | None]:
    """Competition ranking, higher is better; undefined values are unranked."""
    defined = sorted((v for v in values.values() if v is not None), reverse=True)
    return {k: (1 + defined.index(v) if v is not None else None) for k, v in values.items()}


def model_scores(
    *, schema, item_ids: list[int], references: dict[str, list[dict]], lexicon: dict | None, with_ci: bool = True
) -> dict:
    """Score each provider's newest candidate against one or more reference record lists.

    meme3w-shaped schemas (the five fields of metrics.records): the Table 1 columns from
    ``metrics.records.field_scores`` plus a bootstrap CI of JRA, ranked by JRA. Other schemas:
    the primary agreement figure of each target field and their mean, ranked by the mean. A
    provider without a candidate for an item is scored as an invalid prediction there (Meme3W
    B.1: malformed outputs are invalid predictions).
    """
    latest, providers = _latest_candidates(item_ids=item_ids)
    record_metrics = _uses_record_metrics(schema)
    rows = []
    for pid, info in sorted(providers.items(), key=lambda kv: (kv[1]["name"], kv[0])):
        preds = [latest.get((i, pid), {}) for i in item_ids]
        row = {
            "provider": info["name"],
            "model": info["model"],
            "coverage": sum(1 for i in item_ids if (i, pid) in latest),
            "n": len(item_ids),
            "scores": {},
        }
        for ref_name, golds in references.items():
            row["scores"][ref_name] = _score_against(
                schema, preds, golds, item_ids, lexicon=lexicon, record_metrics=record_metrics, with_ci=with_ci
            )
        rows.append(row)
    key = "jra" if record_metrics else "mean"
    ranks = {}
    for ref_name in references:
        ranks[ref_name] = _rank({r["provider"]: r["scores"][ref_name].get(key) for r in rows})
        for r in rows:
            r.setdefault("rank", {})[ref_name] = ranks[ref_name][r["provider"]]
    verdict = ordering_verdict(rows, list(references), key=key)
    return {
        "ranking_metric": "JRA" if record_metrics else "mean of target-field agreement",
        "ranking_key": key,
        "rows": rows,
        "ordering": verdict["ordering"],
        "ordering_note": verdict["note"],
        "same_order": verdict["ordering"] == "same",
    }


def _separated(a: list | None, b: list | None) -> int:
    """+1 when CI a lies wholly above CI b, -1 below, 0 when they overlap or one is missing."""
    if not a or not b:
        return 0
    if a[0] > b[1]:
        return 1
    if a[1] < b[0]:
        return -1
    return 0


def ordering_verdict(rows: list[dict], references: list[str], *, key: str) -> dict:
    """Does the ranking of the models differ between references (gold vs blind)? Claimed only
    where the data carry it: "changes" needs a pair of models whose CIs separate in opposite
    directions under two references; orderings of point estimates alone are "same" or "cannot tell".
    """
    if len(references) < 2 or len(rows) < 2:
        return {"ordering": None, "note": "one reference or one model: nothing to compare"}
    first = references[0]
    for other in references[1:]:
        for x in rows:
            for y in rows:
                if x is y:
                    continue
                sx, sy = x["scores"][first], y["scores"][first]
                ox, oy = x["scores"][other], y["scores"][other]
                if (
                    _separated(sx.get(f"{key}_ci"), sy.get(f"{key}_ci")) == 1
                    and _separated(ox.get(f"{key}_ci"), oy.get(f"{key}_ci")) == -1
                ):
                    return {
                        "ordering": "changes",
                        "note": f"{x['provider']} ranks above {y['provider']} against {first} and below it against "
                        f"{other}, with 95% CIs that do not overlap",
                    }
    same = all(r["rank"][ref] == r["rank"][first] for r in rows for ref in references[1:])
    if same:
        return {"ordering": "same", "note": "the models rank the same against every reference"}
    return {
        "ordering": "cannot tell",
        "note": "the point estimates rank the models differently, but their 95% CIs overlap: the data cannot "
        "tell whether the ordering differs",
    }


def _score_against(schema, preds, golds, item_ids, *, lexicon, record_metrics: bool, with_ci: bool) -> dict:
    if not golds:
        return {}
    if record_metrics:
        try:
            scores = field_scores(preds, golds, lexicon)
            per_record = jra_scores(preds, golds, lexicon)
        except ValueError as exc:  # a reference record the metrics refuse (e.g. an old schema)
            return {"error": str(exc)}
        out = {k: agreement.rnd(v) if isinstance(v, float) else v for k, v in scores.items()}
        out["jra_ci"] = None
        if with_ci and per_record.size:
            est = bootstrap_figures(
                {"jra": mean_contributions(per_record)}, n=agreement.RESAMPLES, seed=agreement.SEED
            )["jra"]
            out["jra_ci"] = [agreement.rnd(x) for x in est.ci] if est.ci else None
        return out
    results = agreement.reference_scores(schema, list(zip(golds, preds)), item_ids, lexicon=lexicon, with_ci=False)
    t9 = agreement.table9(results)
    return {"fields": {r["field"]: r["value"] for r in t9["rows"]}, "mean": t9["mean"]}
