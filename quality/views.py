"""Quality pages: the lead's dashboard, the agreement report, blind audits, anchoring.

Access (projects.access: non-member 404, wrong role 403): the dashboard and anchoring are for
leads only (they show annotator names and hidden model identities); the agreement report and
the audit reports are readable by leads and researchers; only leads start computations and
audits. Auditors, annotators and reviewers get 403 everywhere here.
"""

from __future__ import annotations

import csv
import io
import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.views import form_errors
from projects.access import project_get_for_user
from projects.models import Role
from quality import anchoring, audits, display, progress, reports
from quality.forms import AuditCreateForm, ReportFilterForm
from quality.models import AgreementReport
from quality.services import agreement_report_current, agreement_report_request, audit_create

LEAD = [Role.LEAD]
READERS = [Role.LEAD, Role.RESEARCHER]
Status = AgreementReport.Status


# ---------------------------------------------------------------------------- agreement report state


def _filters(data, project) -> tuple[ReportFilterForm, dict | None]:
    """(form, cleaned filters or None when invalid). No query parameters: the defaults."""
    keys = set(ReportFilterForm.base_fields)
    present = {k: v for k, v in data.items() if k in keys}
    form = ReportFilterForm(present or None, options=reports.filter_options(project=project))
    if not present:
        return form, dict(reports.DEFAULT_FILTERS)
    return (form, form.filters()) if form.is_valid() else (form, None)


def _query(filters: dict | None) -> str:
    if not filters:
        return ""
    clean = {k: v for k, v in filters.items() if v and reports.DEFAULT_FILTERS.get(k) != v}
    return ("?" + urlencode(clean)) if clean else ""


def _agreement_context(request, project) -> dict:
    form, filters = _filters(request.GET, project)
    ctx = {
        "project": project,
        "form": form,
        "filters": filters,
        "query": _query(filters),
        "is_lead": Role.LEAD in project.user_roles,
        "state": None,
    }
    if filters is None:
        return ctx
    state = agreement_report_current(project=project, filters=filters, user=request.user)
    ctx["state"] = state
    if state["result"]:
        agreement = state["result"]["agreement"]
        ctx["agreement"] = agreement
        ctx["headline_svg"] = display.headline_chart(project, agreement["headline"])
        ctx["paper"] = display.paper_refs(project, display.PAPER_STAGE2)
    return ctx


# ---------------------------------------------------------------------------- pages


@login_required
@require_GET
def dashboard(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    ctx = _agreement_context(request, project)
    ctx["pipeline_svg"] = display.pipeline_chart(progress.pipeline_counts(project=project))
    ctx["throughput"] = display.throughput_charts(
        progress.throughput_by_annotator(project=project), progress.throughput_by_day(project=project)
    )
    result = (ctx.get("state") or {}).get("result")
    if result:
        dash = result["dashboard"]
        ids = {x for c in dash["confusions"] for m in c["matrices"] if m["pair"] for x in m["pair"]}
        ctx["over_time_svg"] = display.over_time_chart(dash["over_time"])
        ctx["confusions"] = display.confusion_charts(dash["confusions"], progress.usernames(ids=ids))
        ctx["histograms"] = display.histogram_charts(dash["histograms"])
        ctx["worst"] = display.worst_rows(project, dash["worst_items"])
    anchor = anchoring.anchoring_report(project=project, with_gold_scores=False)
    ctx["anchoring"] = anchor
    ctx["anchoring_svg"] = display.anchoring_charts(anchor)["overall"] if anchor["models"] else None
    return render(request, "quality/dashboard.html", ctx)


@login_required
@require_GET
def agreement_page(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
    ctx = _agreement_context(request, project)
    if ctx.get("agreement"):
        ctx["fields_svg"] = display.fields_chart(ctx["agreement"]["fields"])
    return render(request, "quality/agreement.html", ctx)


@login_required
@require_POST
def agreement_compute(request, slug):
    """The lead's "Recompute" button: queue a job for the current data (htmx: the progress fragment)."""
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    form, filters = _filters(request.POST, project)
    back = request.POST.get("back") == "agreement" and "quality_agreement" or "quality_dashboard"
    if filters is None:
        messages.error(request, "Fix the filters first: " + "; ".join(m for ms in form.errors.values() for m in ms))
        return redirect(back, slug=project.slug)
    row, enqueued = agreement_report_request(project=project, filters=filters, user=request.user, force=True)
    if request.htmx:
        row.refresh_from_db()  # an eager or very fast worker may already have published it
        response = render(request, "jobs/_progress.html", {"project": project, "job": row, "can_cancel": True})
        if row.finished:
            response["HX-Refresh"] = "true"
        return response
    messages.info(request, "Recomputing the agreement report." if enqueued else "The report is already being computed.")
    return redirect(reverse(back, args=[project.slug]) + _query(filters))


def _agreement_for_download(request, project):
    form, filters = _filters(request.GET, project)
    if filters is None:
        return None, {"detail": "Invalid filters.", "errors": form.errors.get_json_data()}, 400
    state = agreement_report_current(project=project, filters=filters, user=request.user)
    if state["stale"] or not state["result"]:
        return (
            None,
            {
                "detail": "The report for the current data and these filters is not computed yet; "
                "a lead can start it from the quality dashboard."
            },
            409,
        )
    return state["result"]["agreement"], None, 200


@login_required
@require_GET
def agreement_json(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
    data, error, status = _agreement_for_download(request, project)
    if data is None:
        return JsonResponse(error, status=status)
    response = HttpResponse(json.dumps(data, sort_keys=True, indent=2), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{project.slug}-agreement.json"'
    return response


def agreement_csv_text(agreement: dict) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["field", "type", "figure", "label", "value", "ci_low", "ci_high", "n", "primary", "items"])
    for f in agreement["fields"]:
        for fig in f["figures"]:
            ci = fig["ci"] or [None, None]
            w.writerow(
                [
                    f["field"],
                    f["type"],
                    fig["key"],
                    fig["label"],
                    fig["value"],
                    ci[0],
                    ci[1],
                    fig["n"],
                    int(fig["primary"]),
                    f["items"],
                ]
            )
        for label, k in (f.get("per_label_kappa") or {}).items():
            w.writerow(
                [f["field"], f["type"], f"kappa[{label}]", f"per-label κ: {label}", k, "", "", f["n"], 0, f["items"]]
            )
    return out.getvalue()


@login_required
@require_GET
def agreement_csv(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
    data, error, status = _agreement_for_download(request, project)
    if data is None:
        return HttpResponse(error["detail"], status=status, content_type="text/plain; charset=utf-8")
    response = HttpResponse(agreement_csv_text(data), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{project.slug}-agreement.csv"'
    return response


# ---------------------------------------------------------------------------- audits


def _audit_population_info(project) -> dict:
    targeted = len(audits.audit_population(project=project))
    every = len(audits.audit_population(project=project, include_untargeted=True))
    auditors = list(audits.auditors_for_project(project=project).values_list("username", flat=True))
    return {"targeted": targeted, "all": every, "auditors": auditors}


@login_required
@require_http_methods(["GET", "POST"])
def audits_page(request, slug):
    roles = LEAD if request.method == "POST" else READERS
    project = project_get_for_user(user=request.user, slug=slug, roles=roles)
    info = _audit_population_info(project) if Role.LEAD in project.user_roles else None
    size = project.audit_sample_size  # study settings (Meme3W: 200)
    initial = {"size": min(size, info["targeted"]) if info and info["targeted"] else size}
    form = AuditCreateForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        with form_errors(form):
            audit = audit_create(
                project=project,
                created_by=request.user,
                size=form.cleaned_data["size"],
                seed=form.cleaned_data["seed"],
                include_untargeted=form.cleaned_data["include_untargeted"],
            )
            messages.success(
                request, f"Audit #{audit.pk} created: {audit.size} gold items sent to the auditors (seed {audit.seed})."
            )
            return redirect("quality_audit", slug=project.slug, audit_id=audit.pk)
    return render(
        request,
        "quality/audits.html",
        {
            "project": project,
            "audits": audits.audits_for_project(project=project),
            "form": form,
            "info": info,
            "is_lead": Role.LEAD in project.user_roles,
        },
    )


@login_required
@require_GET
def audit_page(request, slug, audit_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
    audit = audits.audit_get_for_project(project=project, audit_id=audit_id)
    report = audits.audit_report(audit=audit)
    is_lead = Role.LEAD in project.user_roles
    return render(
        request,
        "quality/audit.html",
        {
            "project": project,
            "audit": audit,
            "report": report,
            "is_lead": is_lead,
            "by_auditor": audits.audit_progress_by_auditor(audit=audit) if is_lead else None,
            "table9_svg": display.table9_chart(project, report["table9"]),
            "models_svg": display.model_ranking_chart(report["models"]) if report["models"]["rows"] else None,
            "paper": display.paper_refs(project, display.PAPER_TABLE9),
            "paper_mean": display.PAPER_TABLE9_MEAN if project.preset == "meme3w" else None,
        },
    )


@login_required
@require_GET
def audit_json(request, slug, audit_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
    audit = audits.audit_get_for_project(project=project, audit_id=audit_id)
    response = HttpResponse(
        json.dumps(audits.audit_report(audit=audit), sort_keys=True, indent=2), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="{project.slug}-audit-{audit.pk}.json"'
    return response


def audit_csv_text(report: dict) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["section", "field", "figure", "value", "ci_low", "ci_high", "n"])
    for r in report["table9"]["rows"]:
        ci = r["ci"] or [None, None]
        w.writerow(["table9", r["field"], r["metric"], r["value"], ci[0], ci[1], r["n"]])
    w.writerow(["table9", "unweighted mean", "", report["table9"]["mean"], "", "", ""])
    for f in report["fields"]:
        for fig in f["figures"]:
            ci = fig["ci"] or [None, None]
            w.writerow(["field", f["field"], fig["label"], fig["value"], ci[0], ci[1], fig["n"]])
    models = report.get("models") or {}
    key = models.get("ranking_key")
    for r in models.get("rows", []):
        for ref, scores in r["scores"].items():
            ci = scores.get("jra_ci") or [None, None]
            w.writerow(
                [
                    f"model vs {ref}",
                    f"{r['provider']} ({r['model']})",
                    models.get("ranking_metric"),
                    scores.get(key),
                    ci[0],
                    ci[1],
                    r["n"],
                ]
            )
    return out.getvalue()


@login_required
@require_GET
def audit_csv(request, slug, audit_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
    audit = audits.audit_get_for_project(project=project, audit_id=audit_id)
    response = HttpResponse(audit_csv_text(audits.audit_report(audit=audit)), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{project.slug}-audit-{audit.pk}.csv"'
    return response


# ---------------------------------------------------------------------------- anchoring


@login_required
@require_GET
def anchoring_page(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    report = anchoring.anchoring_report(project=project)
    return render(
        request,
        "quality/anchoring.html",
        {
            "project": project,
            "report": report,
            "charts": display.anchoring_charts(report),
        },
    )


@login_required
@require_GET
def anchoring_json(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    response = HttpResponse(
        json.dumps(anchoring.anchoring_report(project=project), sort_keys=True, indent=2),
        content_type="application/json",
    )
    response["Content-Disposition"] = f'attachment; filename="{project.slug}-anchoring.json"'
    return response


def anchoring_csv_text(report: dict) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(
        ["section", "provider", "model", "annotator", "field", "offered", "taken", "edited", "take_rate", "edit_rate"]
    )
    for m in report["models"]:
        for f in m["fields"]:
            w.writerow(
                [
                    "by_field",
                    m["provider"],
                    m["model"],
                    "",
                    f["field"],
                    f["offered"],
                    f["taken"],
                    f["edited"],
                    f["take_rate"],
                    f["edit_rate"],
                ]
            )
    for a in report["by_annotator"]:
        for m in a["models"]:
            w.writerow(
                [
                    "by_annotator",
                    m["provider"],
                    "",
                    a["annotator"],
                    "",
                    m["offered"],
                    m["taken"],
                    m["edited"],
                    m["take_rate"],
                    m["edit_rate"],
                ]
            )
    gs = report.get("gold_scores") or {}
    for r in gs.get("rows", []):
        for k, v in (r["scores"].get("gold") or {}).items():
            if not isinstance(v, (list, dict)):
                w.writerow(["vs_gold", r["provider"], r["model"], "", k, "", "", "", v, ""])
    return out.getvalue()


@login_required
@require_GET
def anchoring_csv(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    response = HttpResponse(
        anchoring_csv_text(anchoring.anchoring_report(project=project)), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{project.slug}-anchoring.csv"'
    return response
