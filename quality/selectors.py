"""Read paths of the quality app: agreement reports, audit reports, anchoring, dashboards.

Everything here reads; the only writes (cache rows, audits) are in quality.services. The two
``*_for_export`` functions are the contract with the exports app: JSON-serializable,
deterministic (same data => byte-identical ``json.dumps(..., sort_keys=True)``), no
timestamps, no user names.

Model identities (provider / model names) appear only in ``anchoring_report`` and in the
audit's model re-scoring; views and APIs restrict those to leads (anchoring) and leads +
researchers (audit), never annotators, reviewers or auditors.
"""
from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db.models import Count, Max, Q, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from adjudication.models import GoldRecord, LexiconVersion
from adjudication.services import lexicon_current
from annotation.models import Annotation, Kind
from candidates.models import Candidate, Provider
from metrics.bootstrap import mean_ci
from metrics.records import FIELDS, field_scores, jra_scores
from projects.models import Item, Project, Role, Stage
from quality import compute
from quality.compute import Unit
from quality.models import AgreementReport, Audit, AuditItem

SUBMITTED = Annotation.Status.SUBMITTED
DEFAULT_FILTERS = {"source_dataset": "", "language": "", "category": "", "date_from": "", "date_to": "",
                   "scope": compute.DEFAULT_SCOPE}


def sync_max_annotations(*, project: Project | None = None) -> int:
    """Above this many submitted annotations a report is computed by a Celery job, not in the
    request (bench/quality.py: 3,000 two-annotator annotations take well under a second; with
    three or more annotators per item the pairwise/alpha bootstrap costs ~5x more per annotation)."""
    limit = int(getattr(settings, "QUALITY_SYNC_MAX_ANNOTATIONS", 3000))
    return limit if project is None or project.annotators_per_item <= 2 else limit // 5


# ---------------------------------------------------------------------------- filters and keys

def filter_key(filters: dict) -> str:
    canonical = {k: filters.get(k, v) or v for k, v in DEFAULT_FILTERS.items()}
    return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()


def data_fingerprint(*, project: Project) -> str:
    """Changes whenever anything the agreement report reads changes: submissions and
    re-submissions (kind "annotation"), items (count, exclusions), lexicon, schema. Draft
    autosaves do not change it. Three aggregate queries."""
    ann = Annotation.objects.filter(item__project=project, kind=Kind.ANNOTATION, status=SUBMITTED).aggregate(
        n=Count("id"), top=Max("id"), last=Max("submitted_at"),
    )
    items = Item.objects.filter(project=project).aggregate(
        n=Count("id"), excluded=Count("id", filter=Q(stage=Stage.EXCLUDED)), top=Max("id"),
    )
    lexicon = LexiconVersion.objects.filter(project=project).aggregate(v=Max("version"))["v"]
    payload = [compute.REPORT_VERSION, ann, items, lexicon, project.schema_version, project.annotators_per_item]
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def filter_options(*, project: Project) -> dict:
    """Values the filter form offers: source datasets, languages, category options per field."""
    rows = Item.objects.filter(project=project).values_list("source_dataset", "language").distinct()
    datasets = sorted({d for d, _ in rows if d})
    languages = sorted({lang for _, lang in rows if lang})
    categories = []
    for spec in project.get_schema().fields:
        if spec.get("choices"):
            categories.append((spec.get("label") or spec["name"],
                               [(f"{spec['name']}={c}", c) for c in spec["choices"]]))
    return {"source_datasets": datasets, "languages": languages, "categories": categories}


# ---------------------------------------------------------------------------- data for agreement

def _local_date(ts: datetime | None) -> date | None:
    return timezone.localtime(ts).date() if ts is not None else None


def report_units(*, project: Project, filters: dict | None = None) -> list[Unit]:
    """Items with two or more submitted annotations (kind "annotation") and their values by slot.

    Slots: the first ``annotators_per_item`` submissions in order of first submission (the ones
    adjudication.services.item_route compares). Excluded items are left out. Filters: source
    dataset and language of the item; ``category`` = "field=value": at least one annotator chose
    that value (pre-adjudication data has no single truth); date range on the day the item's
    last compared annotation was first submitted (when its pair became complete). One query.
    """
    f = {**DEFAULT_FILTERS, **(filters or {})}
    qs = Annotation.objects.filter(item__project=project, kind=Kind.ANNOTATION, status=SUBMITTED).exclude(
        item__stage=Stage.EXCLUDED
    )
    if f["source_dataset"]:
        qs = qs.filter(item__source_dataset=f["source_dataset"])
    if f["language"]:
        qs = qs.filter(item__language=f["language"])
    rows = qs.order_by("item_id", "first_submitted_at", "id").values_list(
        "item_id", "annotator_id", "values", "first_submitted_at", "submitted_at"
    )
    grouped: dict[int, list[tuple]] = defaultdict(list)
    for item_id, annotator_id, values, first, last in rows:
        grouped[item_id].append((annotator_id, values or {}, first or last))
    cat_field, cat_value = (f["category"].split("=", 1) + [""])[:2] if f["category"] else ("", "")
    date_from = date.fromisoformat(f["date_from"]) if f["date_from"] else None
    date_to = date.fromisoformat(f["date_to"]) if f["date_to"] else None
    units = []
    for item_id in sorted(grouped):
        slots = grouped[item_id][: project.annotators_per_item]
        if len(slots) < 2:
            continue
        completed = max((s[2] for s in slots if s[2] is not None), default=None)
        day = _local_date(completed)
        if date_from and (day is None or day < date_from):
            continue
        if date_to and (day is None or day > date_to):
            continue
        if cat_field:
            chosen = [s[1].get(cat_field) for s in slots]
            if not any(v == cat_value or (isinstance(v, list) and cat_value in v) for v in chosen):
                continue
        units.append(Unit(item_id=item_id, values=tuple(s[1] for s in slots),
                          annotators=tuple(s[0] for s in slots), completed_at=completed))
    return units


def agreement_report_build(*, project: Project, filters: dict | None = None, progress=None) -> dict:
    """Compute the agreement report and the dashboard analytics from the database (no caching).

    ``result["agreement"]`` holds no timestamps and no user names (exports and researchers);
    ``result["dashboard"]`` is for leads (annotator ids in the confusion-matrix pairs).
    """
    f = {**DEFAULT_FILTERS, **(filters or {})}
    schema = project.get_schema()
    lexicon_version, lexicon = lexicon_current(project=project)
    units = report_units(project=project, filters=f)
    scope = f["scope"]
    results = compute.agreement_figures(schema, units, lexicon=lexicon, scope=scope, progress=progress)
    agreement = {
        "report_version": compute.REPORT_VERSION,
        "schema_version": project.schema_version,
        "lexicon_version": lexicon_version,
        "annotators_per_item": project.annotators_per_item,
        "filters": {k: f[k] for k in DEFAULT_FILTERS},
        "scope": scope,
        "scope_description": compute.SCOPES[scope],
        "n_items": len(units),
        "n_annotations": sum(len(u.values) for u in units),
        "max_slots": compute.slot_count(units),
        "method": {
            "raters": "slots: each item's submitted annotations in order of first submission",
            "bootstrap": f"percentile 95% CI over items; kappa_ci / mean_ci with {compute.BOOTSTRAP_N} resamples; "
                         f"pairwise means, macro κ and α: up to {compute.GENERIC_BOOTSTRAP_N} resamples (fewer, at "
                         f"least {compute.GENERIC_MIN}, for very large projects: see each figure's resamples); "
                         f"seed {compute.SEED}",
            "entity_lexicon": "project lexicon, current version",
        },
        "headline": compute.headline(results),
        "fields": [compute.field_result_dict(r, schema, scope) for r in results],
    }
    dashboard = {
        "over_time": compute.agreement_over_time(schema, units, lexicon=lexicon, scope=scope),
        "confusions": compute.confusions(schema, units),
        "histograms": compute.histograms(results),
        "worst_items": compute.worst_items(results),
    }
    return {"agreement": agreement, "dashboard": dashboard}


def cached_report(*, project: Project, filters: dict, fingerprint: str) -> AgreementReport | None:
    return AgreementReport.objects.filter(
        project=project, filter_key=filter_key(filters), fingerprint=fingerprint
    ).first()


def latest_done_report(*, project: Project, filters: dict) -> AgreementReport | None:
    return (
        AgreementReport.objects.filter(project=project, filter_key=filter_key(filters), status=AgreementReport.Status.DONE)
        .order_by("-finished_at", "-id")
        .first()
    )


def submitted_annotation_count(*, project: Project) -> int:
    return Annotation.objects.filter(item__project=project, kind=Kind.ANNOTATION, status=SUBMITTED).count()


def agreement_report_for_export(*, project: Project) -> dict:
    """The project's agreement report (all items, default scope) for a dataset release.

    Deterministic: fixed bootstrap seeds, values rounded to 6 digits, no timestamps, no user
    names. Served from the cache when the data is unchanged, else computed here (exports run
    in a worker). Empty projects give a report with ``n_items`` 0 and null figures.
    """
    fp = data_fingerprint(project=project)
    row = cached_report(project=project, filters=DEFAULT_FILTERS, fingerprint=fp)
    if row is not None and row.status == AgreementReport.Status.DONE and row.result:
        return json.loads(json.dumps(row.result["agreement"]))
    return agreement_report_build(project=project, filters=DEFAULT_FILTERS)["agreement"]


# ---------------------------------------------------------------------------- audit

def category_plan(plans: list[compute.FieldPlan]) -> compute.FieldPlan | None:
    """The stratification category: the first conditional single-choice field (Meme3W's target
    category), else the first single-choice field (e.g. AHA's is_hateful), else none."""
    cats = [p for p in plans if p.kind == compute.CATEGORICAL]
    return next((p for p in cats if p.conditional), cats[0] if cats else None)


def stratum_of(schema, plans: list[compute.FieldPlan], values: dict) -> tuple[str, str]:
    """(key, readable label) of a gold record's stratum: category x presence of each grounding field."""
    parts, labels = [], []
    cat = category_plan(plans)
    if cat is not None:
        v = values.get(cat.name)
        parts.append(f"{cat.name}={v if v else '-'}")
        labels.append(str(v) if v else f"no {cat.label.lower()}")
    for p in plans:
        # The audit's "grounding condition" (Meme3W A.2: mention present/absent x region present/absent).
        if "grounding" in p.ftype.roles:
            present = not schema.type_of(p.name).is_absent(p.spec, values.get(p.name))
            parts.append(f"{p.name}={'present' if present else 'absent'}")
            labels.append(f"{p.label.lower()} {'present' if present else 'absent'}")
    return "|".join(parts) or "all", " · ".join(labels) or "all items"


def audit_population(*, project: Project, include_untargeted: bool = False) -> list[tuple[int, dict]]:
    """(item id, current gold values) of the gold items an audit may sample, by item id.

    Default: items whose gold record has a target (the stratification category applies, e.g.
    harmful memes), as in the paper's audit of target fields; ``include_untargeted`` adds the
    others as strata of their own.
    """
    schema = project.get_schema()
    plans = compute.field_plans(schema)
    cat = category_plan(plans)
    rows = (
        GoldRecord.objects.filter(item__project=project, item__stage=Stage.GOLD, is_current=True)
        .order_by("item_id")
        .values_list("item_id", "values")
    )
    out = []
    for item_id, values in rows:
        if not include_untargeted and cat is not None and cat.conditional and not schema.is_visible(cat.spec, values):
            continue
        out.append((item_id, values))
    return out


def auditors_for_project(*, project: Project):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(
        memberships__project=project, memberships__role=Role.AUDITOR
    ).distinct().order_by("id")


def audits_for_project(*, project: Project):
    """Audits with their progress counts, newest first (one query)."""
    return (
        Audit.objects.filter(project=project)
        .select_related("created_by")
        .annotate(
            n_items=Count("audit_items", distinct=True),
            n_assigned=Count("audit_items", filter=Q(audit_items__auditor__isnull=False), distinct=True),
            n_submitted=Count("audit_items", filter=Q(audit_items__annotation__status=SUBMITTED), distinct=True),
        )
        .order_by("-created_at", "-id")
    )


def audit_get_for_project(*, project: Project, audit_id) -> Audit:
    from django.http import Http404

    try:
        return Audit.objects.get(project=project, pk=int(audit_id))
    except (Audit.DoesNotExist, ValueError, TypeError):
        raise Http404("No such audit") from None


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


def model_scores(*, schema, item_ids: list[int], references: dict[str, list[dict]], lexicon: dict | None,
                 with_ci: bool = True) -> dict:
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
        row = {"provider": info["name"], "model": info["model"],
               "coverage": sum(1 for i in item_ids if (i, pid) in latest), "n": len(item_ids), "scores": {}}
        for ref_name, golds in references.items():
            row["scores"][ref_name] = _score_against(schema, preds, golds, item_ids, lexicon=lexicon,
                                                    record_metrics=record_metrics, with_ci=with_ci)
        rows.append(row)
    key = "jra" if record_metrics else "mean"
    ranks = {}
    for ref_name in references:
        ranks[ref_name] = _rank({r["provider"]: r["scores"][ref_name].get(key) for r in rows})
        for r in rows:
            r.setdefault("rank", {})[ref_name] = ranks[ref_name][r["provider"]]
    names = list(references)
    same = all(ranks[n] == ranks[names[0]] for n in names[1:]) if names else True
    return {"ranking_metric": "JRA" if record_metrics else "mean of target-field agreement",
            "ranking_key": key, "rows": rows, "same_order": same}


def _score_against(schema, preds, golds, item_ids, *, lexicon, record_metrics: bool, with_ci: bool) -> dict:
    if not golds:
        return {}
    if record_metrics:
        try:
            scores = field_scores(preds, golds, lexicon)
            per_record = jra_scores(preds, golds, lexicon)
        except ValueError as exc:  # a reference record the metrics refuse (e.g. an old schema)
            return {"error": str(exc)}
        out = {k: compute.rnd(v) if isinstance(v, float) else v for k, v in scores.items()}
        out["jra_ci"] = (
            [compute.rnd(x) for x in mean_ci(per_record, n=compute.BOOTSTRAP_N, seed=compute.SEED)]
            if with_ci and per_record.size else None
        )
        return out
    results = compute.reference_scores(schema, list(zip(golds, preds)), item_ids, lexicon=lexicon, with_ci=False)
    t9 = compute.table9(results)
    return {"fields": {r["field"]: r["value"] for r in t9["rows"]}, "mean": t9["mean"]}


def audit_report(*, audit: Audit, with_models: bool = True) -> dict:
    """Blind-vs-gold per field (Table 9 layout + every schema field), strata coverage and the
    candidate models re-scored against the blind annotations vs against gold. No timestamps,
    no auditor names (see ``audit_progress_by_auditor`` for the lead's view)."""
    project = audit.project
    schema = project.get_schema()
    _, lexicon = lexicon_current(project=project)
    rows = list(
        AuditItem.objects.filter(audit=audit)
        .order_by("item_id")
        .values_list("item_id", "stratum", "auditor_id", "annotation__status", "annotation__values")
    )
    item_ids = [r[0] for r in rows]
    gold = dict(GoldRecord.objects.filter(item_id__in=item_ids, is_current=True).values_list("item_id", "values"))
    done = [(i, gold[i], values) for i, _, _, status, values in rows if status == SUBMITTED and i in gold]
    done_ids = [i for i, _, _ in done]
    results = compute.reference_scores(schema, [(g, b) for _, g, b in done], done_ids, lexicon=lexicon)
    strata_submitted: dict[str, int] = defaultdict(int)
    for _, stratum, _, status, _ in rows:
        if status == SUBMITTED:
            strata_submitted[stratum] += 1
    strata = [{**s, "submitted": strata_submitted.get(s["key"], 0)} for s in audit.strata]
    report = {
        "audit_id": audit.pk,
        "size": audit.size,
        "seed": audit.seed,
        "include_untargeted": audit.include_untargeted,
        "progress": {
            "sampled": len(rows),
            "assigned": sum(1 for r in rows if r[2] is not None),
            "submitted": sum(1 for r in rows if r[3] == SUBMITTED),
            "compared": len(done),
        },
        "items": "all sampled items with a submitted blind annotation and a current gold record",
        "strata": strata,
        "table9": compute.table9(results),
        "fields": [compute.field_result_dict(r, schema, "all") for r in results],
        "notes": list(audit.notes),
    }
    if with_models:
        report["models"] = model_scores(
            schema=schema, item_ids=done_ids, lexicon=lexicon,
            references={"gold": [g for _, g, _ in done], "blind": [b for _, _, b in done]},
        ) if done else {"rows": [], "same_order": None, "ranking_metric": None, "ranking_key": None}
    return report


def audit_report_for_export(*, project: Project) -> dict | None:
    """The latest audit's report for a dataset release, or None when the project has no audit.

    Deterministic (fixed seeds, rounded values, no timestamps, no auditor names); model names
    are included (researchers may see them, SPEC section 5).
    """
    audit = Audit.objects.filter(project=project).order_by("-created_at", "-id").first()
    if audit is None:
        return None
    return audit_report(audit=audit)


def audit_progress_by_auditor(*, audit: Audit) -> list[dict]:
    """Per auditor: assigned and submitted (lead view; one query)."""
    rows = (
        AuditItem.objects.filter(audit=audit, auditor__isnull=False)
        .values("auditor__username")
        .annotate(assigned=Count("id"), submitted=Count("id", filter=Q(annotation__status=SUBMITTED)))
        .order_by("auditor__username")
    )
    return [{"auditor": r["auditor__username"], "assigned": r["assigned"], "submitted": r["submitted"]} for r in rows]


# ---------------------------------------------------------------------------- anchoring

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
    for item_id, _, username, provenance in anns:
        offers = offered_by_item.get(item_id, {})
        for pid, fields in offers.items():
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
            for bucket in (per_field[(pid, f)], per_annotator[(username, pid)]):
                bucket["taken"] += 1
                bucket["edited"] += int(edited)

    def rates(b: dict) -> dict:
        return {**b, "take_rate": compute.rnd(b["taken"] / b["offered"]) if b["offered"] else None,
                "edit_rate": compute.rnd(b["edited"] / b["taken"]) if b["taken"] else None}

    ordered = sorted(provider_info.items(), key=lambda kv: (kv[1]["name"], kv[0]))
    models = []
    for pid, info in ordered:
        fields = [{"field": f, **rates(per_field[(pid, f)])} for f in names]
        total = {k: sum(x[k] for x in fields) for k in ("offered", "taken", "edited")}
        models.append({"provider": info["name"], "model": info["model"], "fields": fields, "total": rates(total)})
    annotators = sorted({a[2] for a in anns})
    by_annotator = [
        {"annotator": u, "fields_with_candidates": annotator_fields[u],
         "models": [{"provider": info["name"], **rates(per_annotator[(u, pid)])} for pid, info in ordered]}
        for u in annotators
    ]
    leaned = max((m for m in models if m["total"]["taken"]), key=lambda m: (m["total"]["taken"], m["provider"]), default=None)
    gold_rows = list(
        GoldRecord.objects.filter(item__project=project, is_current=True, item__stage=Stage.GOLD)
        .order_by("item_id").values_list("item_id", "values")
    ) if with_gold_scores else []
    _, lexicon = lexicon_current(project=project) if gold_rows else (None, None)
    gold_scores = model_scores(
        schema=schema, item_ids=[i for i, _ in gold_rows], lexicon=lexicon,
        references={"gold": [v for _, v in gold_rows]},
    ) if gold_rows else None
    return {
        "fields": names,
        "models": models,
        "own_values": [{"field": f, **own[f], "own_rate": compute.rnd(own[f]["own"] / own[f]["with_candidates"])
                        if own[f]["with_candidates"] else None} for f in names],
        "by_annotator": by_annotator,
        "most_taken": leaned["provider"] if leaned else None,
        "n_annotations": len(anns),
        "n_gold": len(gold_rows),
        "gold_scores": gold_scores,
    }


# ---------------------------------------------------------------------------- live dashboard parts

PIPELINE = [
    (Stage.NEW, "Awaiting candidates"),
    (Stage.ANNOTATING, "Annotating"),
    (Stage.ADJUDICATION, "In adjudication"),
    (Stage.GOLD, "Gold"),
]


def pipeline_counts(*, project: Project) -> list[dict]:
    """Items per stage plus gold items with a submitted blind audit (two queries)."""
    counts = dict(Item.objects.filter(project=project).values_list("stage").annotate(n=Count("id")))
    audited = (
        Annotation.objects.filter(item__project=project, kind=Kind.AUDIT, status=SUBMITTED)
        .values("item_id").distinct().count()
    )
    rows = [{"stage": s.value, "label": label, "n": counts.get(s, 0)} for s, label in PIPELINE]
    rows.append({"stage": "audited", "label": "Audited (blind)", "n": audited})
    if counts.get(Stage.EXCLUDED):
        rows.append({"stage": "excluded", "label": "Excluded", "n": counts[Stage.EXCLUDED]})
    return rows


def throughput_by_annotator(*, project: Project) -> list[dict]:
    rows = (
        Annotation.objects.filter(item__project=project, kind=Kind.ANNOTATION, status=SUBMITTED)
        .values("annotator__username")
        .annotate(n=Count("id"), ms=Sum("time_spent_ms"))
        .order_by("-n", "annotator__username")
    )
    return [{"annotator": r["annotator__username"], "n": r["n"],
             "seconds_per_item": round((r["ms"] or 0) / 1000 / r["n"], 1) if r["n"] else None} for r in rows]


def throughput_by_day(*, project: Project, days: int = 30) -> list[dict]:
    """First submissions per day over the last ``days`` days, zero-filled."""
    today = timezone.localdate()
    start = today - timedelta(days=days - 1)
    rows = dict(
        Annotation.objects.filter(item__project=project, kind=Kind.ANNOTATION, first_submitted_at__date__gte=start)
        .annotate(day=TruncDate("first_submitted_at"))
        .values_list("day")
        .annotate(n=Count("id"))
        .order_by("day")
    )
    return [{"day": (start + timedelta(days=i)).isoformat(), "n": rows.get(start + timedelta(days=i), 0)}
            for i in range(days)]


def usernames(*, ids: set[int]) -> dict[int, str]:
    from django.contrib.auth import get_user_model

    return dict(get_user_model().objects.filter(pk__in=ids).values_list("id", "username")) if ids else {}
