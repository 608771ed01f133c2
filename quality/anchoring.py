"""Anchoring (leads only: hidden model identities and annotator names): how annotators used
each hidden candidate model, and the models' own scores against gold."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from adjudication.models import GoldRecord
from adjudication.services import lexicon_current
from annotation.models import Annotation, Kind
from candidates.models import Candidate, Provider
from metrics.resample import Contributions, bootstrap_figures, ratio_from_sums
from projects.models import Project, Stage
from quality import agreement
from quality.model_scores import _latest_candidates, model_scores

SUBMITTED = Annotation.Status.SUBMITTED


def anchoring_report(*, project: Project, with_gold_scores: bool = True) -> dict:
    """How annotators used each hidden candidate model (leads only: contains model identities).

    Per provider and field: ``offered`` = submitted annotations of items where the provider's
    newest successful candidate had that field; ``taken`` = annotations whose provenance says
    the value came from one of this provider's candidates; ``edited`` = taken, then changed
    before saving (computed server-side by annotation.services). The same by annotator. Then
    each provider's own scores against the current gold records (Table 1 columns + JRA for
    meme3w-shaped schemas). Four queries plus the gold-scoring ones.
    """
    schema = project.get_schema()
    names = schema.names
    anns = list(
        Annotation.objects.filter(item__project=project, kind=Kind.ANNOTATION, status=SUBMITTED)
        .order_by("id")
        .values_list("item_id", "annotator_id", "annotator__username", "provenance")
    )
    item_ids = sorted({a[0] for a in anns})
    latest, providers = _latest_candidates(item_ids=item_ids)
    cand_provider = dict(Candidate.objects.filter(item__project=project).values_list("id", "provider_id"))
    provider_info = dict(providers.items())
    missing = set(cand_provider.values()) - set(provider_info)
    if missing:
        for pid, name, model in Provider.objects.filter(pk__in=missing).values_list("id", "name", "model"):
            provider_info[pid] = {"name": name, "model": model}
    offered_by_item: dict[int, dict[int, set]] = defaultdict(dict)
    for (item_id, pid), fields in latest.items():
        offered_by_item[item_id][pid] = {f for f in fields if f in names}

    zero = lambda: {"offered": 0, "taken": 0, "edited": 0}  # noqa: E731
    per_field: dict[tuple[int, str], dict] = defaultdict(zero)
    per_annotator: dict[tuple[str, int], dict] = defaultdict(zero)
    own: dict[str, dict] = defaultdict(lambda: {"with_candidates": 0, "own": 0})
    annotator_fields: dict[str, int] = defaultdict(int)
    # Per annotation and provider: fields offered and taken (the bootstrap's per-item contributions).
    provider_ids = sorted(provider_info)
    column = {pid: j for j, pid in enumerate(provider_ids)}
    offered_taken = np.zeros((len(anns), 2 * len(provider_ids)))
    for row, (item_id, _, username, provenance) in enumerate(anns):
        offers = offered_by_item.get(item_id, {})
        for pid, fields in offers.items():
            offered_taken[row, 2 * column[pid] + 1] += len(fields)
            for f in fields:
                per_field[(pid, f)]["offered"] += 1
                per_annotator[(username, pid)]["offered"] += 1
        provenance = provenance or {}
        for f in names:
            entry = provenance.get(f) if isinstance(provenance.get(f), dict) else None
            pid = cand_provider.get(entry.get("candidate_id")) if entry else None
            if offers:
                own[f]["with_candidates"] += 1
                annotator_fields[username] += 1
                if pid is None:
                    own[f]["own"] += 1
            if pid is None:
                continue
            edited = bool(entry.get("edited"))
            if pid in column:
                offered_taken[row, 2 * column[pid]] += 1
            for bucket in (per_field[(pid, f)], per_annotator[(username, pid)]):
                bucket["taken"] += 1
                bucket["edited"] += int(edited)

    def rates(b: dict) -> dict:
        return {
            **b,
            "take_rate": agreement.rnd(b["taken"] / b["offered"]) if b["offered"] else None,
            "edit_rate": agreement.rnd(b["edited"] / b["taken"]) if b["taken"] else None,
        }

    ordered = sorted(provider_info.items(), key=lambda kv: (kv[1]["name"], kv[0]))
    models = []
    for pid, info in ordered:
        fields = [{"field": f, **rates(per_field[(pid, f)])} for f in names]
        total = {k: sum(x[k] for x in fields) for k in ("offered", "taken", "edited")}
        models.append({"provider": info["name"], "model": info["model"], "fields": fields, "total": rates(total)})
    annotators = sorted({a[2] for a in anns})
    by_annotator = [
        {
            "annotator": u,
            "fields_with_candidates": annotator_fields[u],
            "models": [{"provider": info["name"], **rates(per_annotator[(u, pid)])} for pid, info in ordered],
        }
        for u in annotators
    ]
    lean = _lean_claim(models, provider_ids, provider_info, offered_taken)
    gold_rows = (
        list(
            GoldRecord.objects.filter(item__project=project, is_current=True, item__stage=Stage.GOLD)
            .order_by("item_id")
            .values_list("item_id", "values")
        )
        if with_gold_scores
        else []
    )
    _, lexicon = lexicon_current(project=project) if gold_rows else (None, None)
    gold_scores = (
        model_scores(
            schema=schema,
            item_ids=[i for i, _ in gold_rows],
            lexicon=lexicon,
            references={"gold": [v for _, v in gold_rows]},
        )
        if gold_rows
        else None
    )
    return {
        "fields": names,
        "models": models,
        "own_values": [
            {
                "field": f,
                **own[f],
                "own_rate": agreement.rnd(own[f]["own"] / own[f]["with_candidates"])
                if own[f]["with_candidates"]
                else None,
            }
            for f in names
        ],
        "by_annotator": by_annotator,
        "most_taken": lean["provider"],
        "most_taken_note": lean["note"],
        "n_annotations": len(anns),
        "n_gold": len(gold_rows),
        "gold_scores": gold_scores,
    }


def _lean_claim(models: list[dict], provider_ids: list[int], provider_info: dict, offered_taken: np.ndarray) -> dict:
    """Which model annotators lean on most, claimed only when the take rates' 95% CIs separate
    (bootstrap over annotations, the report's one CI method); otherwise say the data cannot tell."""
    if not provider_ids or not offered_taken.size:
        return {"provider": None, "note": "no submitted annotation with candidates yet"}
    figures = {
        pid: Contributions(
            offered_taken[:, 2 * j : 2 * j + 2], ratio_from_sums, int((offered_taken[:, 2 * j + 1] > 0).sum()), str(pid)
        )
        for j, pid in enumerate(provider_ids)
    }
    est = bootstrap_figures(figures, n=agreement.RESAMPLES, seed=agreement.SEED)
    by_name = {provider_info[pid]["name"]: est[pid] for pid in provider_ids}
    for m in models:
        e = by_name.get(m["provider"])
        m["total"]["take_rate_ci"] = [agreement.rnd(x) for x in e.ci] if e is not None and e.ci else None
    defined = [(name, e) for name, e in by_name.items() if e.value is not None and e.ci]
    if not defined:
        return {"provider": None, "note": "no candidate value was offered to annotators yet"}
    top_name, top = max(defined, key=lambda kv: (kv[1].value, kv[0]))
    others = [e for name, e in defined if name != top_name]
    if top.value == 0:
        return {"provider": None, "note": "annotators took no candidate value"}
    if all(top.ci[0] > e.ci[1] for e in others):
        return {
            "provider": top_name,
            "note": f"take rate {agreement.rnd(top.value)} (95% CI {agreement.rnd(top.ci[0])}"
            f"–{agreement.rnd(top.ci[1])}), above every other model's CI",
        }
    return {
        "provider": None,
        "note": "the take rates' 95% CIs overlap: the data cannot tell which model annotators lean on most",
    }
