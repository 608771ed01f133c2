"""Candidate-blind audits (Meme3W Appendix A.2): the gold population and its strata, the
audit report (Table 9: blind vs gold per target field, with n), progress by auditor. The
report holds no timestamps and no auditor names (``audit_progress_by_auditor`` is the lead's)."""

from __future__ import annotations

from collections import defaultdict

from django.contrib.auth import get_user_model
from django.db.models import Count, Q
from django.http import Http404

from adjudication.models import GoldRecord
from adjudication.services import lexicon_current
from annotation.models import Annotation
from projects.fieldtypes import CATEGORICAL
from projects.models import Project, Role, Stage
from quality import agreement
from quality.agreement import FieldPlan
from quality.model_scores import model_scores
from quality.models import Audit, AuditItem

SUBMITTED = Annotation.Status.SUBMITTED


def category_plan(plans: list[FieldPlan]) -> FieldPlan | None:
    """The stratification category: the first conditional single-choice field (Meme3W's target
    category), else the first single-choice field (e.g. AHA's is_hateful), else none."""
    cats = [p for p in plans if p.kind == CATEGORICAL]
    return next((p for p in cats if p.conditional), cats[0] if cats else None)


def stratum_of(schema, plans: list[FieldPlan], values: dict, fields: list[str] | None = None) -> tuple[str, str]:
    """(key, readable label) of a gold record's stratum: category x presence of each grounding
    field, or the values of the project's chosen strata fields (study settings) when given."""
    parts, labels = [], []
    chosen = [name for name in fields or [] if name in schema.by_name]
    if chosen:
        for name in chosen:
            spec, ftype = schema.by_name[name], schema.type_of(name)
            if "grounding" in ftype.roles:  # a mention or a region: present / absent, not the value
                text = "absent" if ftype.is_absent(spec, values.get(name)) else "present"
            else:
                text = ftype.display_text(spec, values.get(name))
            parts.append(f"{name}={text}")
            labels.append(f"{spec.get('label') or name}: {text}")
        return "|".join(parts), " · ".join(labels)
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
    plans = agreement.field_plans(schema)
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

    return (
        get_user_model()
        .objects.filter(memberships__project=project, memberships__role=Role.AUDITOR, memberships__is_active=True)
        .distinct()
        .order_by("id")
    )


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

    try:
        return Audit.objects.get(project=project, pk=int(audit_id))
    except (Audit.DoesNotExist, ValueError, TypeError):
        raise Http404("No such audit") from None


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
    results = agreement.reference_scores(schema, [(g, b) for _, g, b in done], done_ids, lexicon=lexicon)
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
        "items": "sampled items with a submitted blind annotation and a current gold record; each target field is "
        "scored only on the items where gold or the blind annotation makes it applicable (its n), the "
        "other fields on all of them",
        "method": {
            "comparison": "the blind annotation against the current gold record, per field, with the metric "
            "of the field's type (Table 9: the primary figure of each target field)",
            "bootstrap": agreement.method_text(),
            "resamples": agreement.RESAMPLES,
        },
        "strata": strata,
        "table9": agreement.table9(results),
        "label_agreement": [
            {
                "field": r.plan.name,
                "label": r.plan.label,
                "metric": r.plan.agreement.label,
                "n": len(r.item_ids),
                **{k: r.primary[k] for k in ("value", "ci")},
            }
            for r in results
            if not r.plan.conditional and r.primary is not None
        ],
        "fields": [_audit_field(r) for r in results],
        "notes": list(audit.notes),
    }
    if with_models:
        report["models"] = (
            model_scores(
                schema=schema,
                item_ids=done_ids,
                lexicon=lexicon,
                references={"gold": [g for _, g, _ in done], "blind": [b for _, _, b in done]},
            )
            if done
            else {
                "rows": [],
                "same_order": None,
                "ordering": None,
                "ordering_note": "no compared item yet",
                "ranking_metric": None,
                "ranking_key": None,
            }
        )
    return report


def _audit_field(result) -> dict:
    row = agreement.field_result_dict(result, agreement.REFERENCE_SCOPE)
    if result.plan.conditional:
        row["items"] = "items where gold or the blind annotation makes this field applicable"
    else:
        row["items"] = "all compared items"
    return row


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
