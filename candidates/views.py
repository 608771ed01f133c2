"""Lead pages (providers, jobs, progress) and the annotator's anonymized candidate fragment."""
from __future__ import annotations

import json
import os

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from candidates.access import annotator_item_check, job_get_for_project, provider_get_for_project
from candidates.forms import ItemSelectionForm, ProviderForm
from candidates.prompts import prompt_for_project
from candidates.ratelimit import backend_name
from candidates.selectors import (
    candidate_history_with_identity,
    candidates_for_annotator,
    job_failures,
    job_progress,
    jobs_for_project,
    providers_for_project,
)
from candidates.services import (
    candidate_job_retry_failed,
    candidate_job_start,
    items_start_annotation,
    parse_item_ids,
    provider_create,
    provider_set_enabled,
    provider_update,
)
from projects.access import item_get_for_user, project_get_for_user
from projects.models import Item, Role, Stage

LEAD = [Role.LEAD]


def _apply_errors(form, exc: ValidationError) -> None:
    if hasattr(exc, "error_dict"):
        for field, errors in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, exc.messages)


def _provider_rows(project):
    # Whether the key variable is set is checked in this (web) process; workers read their own
    # environment. The value itself never leaves os.environ.
    return [
        {"provider": p, "key_set": bool(p.api_key_env and os.environ.get(p.api_key_env))}
        for p in providers_for_project(project=project)
    ]


@login_required
@require_http_methods(["GET", "POST"])
def providers_page(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    form = ProviderForm(request.POST or None, initial={"enabled": True})
    if request.method == "POST" and form.is_valid():
        try:
            provider = provider_create(project=project, **form.cleaned_data)
        except ValidationError as exc:
            _apply_errors(form, exc)
        else:
            messages.success(request, f"Provider {provider.name} added.")
            return redirect("candidate_providers", slug=project.slug)
    return render(request, "candidates/providers.html", {
        "project": project, "rows": _provider_rows(project), "form": form, "limiter": backend_name(),
    })


@login_required
@require_http_methods(["GET", "POST"])
def provider_edit(request, slug, provider_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    provider = provider_get_for_project(project=project, provider_id=provider_id)
    initial = {f: getattr(provider, f) for f in ProviderForm.base_fields}
    form = ProviderForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            provider_update(provider=provider, **form.cleaned_data)
        except ValidationError as exc:
            _apply_errors(form, exc)
        else:
            messages.success(request, f"Provider {provider.name} saved.")
            return redirect("candidate_providers", slug=project.slug)
    return render(request, "candidates/provider_form.html", {"project": project, "provider": provider, "form": form})


@login_required
@require_POST
def provider_toggle(request, slug, provider_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    provider = provider_get_for_project(project=project, provider_id=provider_id)
    provider_set_enabled(provider=provider, enabled=not provider.enabled)
    messages.info(request, f"Provider {provider.name} {'enabled' if provider.enabled else 'disabled'}.")
    return redirect("candidate_providers", slug=project.slug)


def _selected_ids(form) -> list[int] | None:
    ids = parse_item_ids(form.cleaned_data.get("item_ids") or "")
    return ids or None


@login_required
@require_http_methods(["GET", "POST"])
def jobs_page(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    form = ItemSelectionForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            job = candidate_job_start(project=project, user=request.user, item_ids=_selected_ids(form))
        except ValidationError as exc:
            _apply_errors(form, exc)
        else:
            messages.success(request, f"Candidate job {job.pk} started.")
            return redirect("candidate_job", slug=project.slug, job_id=job.pk)
    return render(request, "candidates/jobs.html", {
        "project": project, "form": form, "skip_form": ItemSelectionForm(),
        "jobs": jobs_for_project(project=project)[:50],
        "new_items": Item.objects.filter(project=project, stage=Stage.NEW).count(),
        "enabled_providers": [p for p in providers_for_project(project=project) if p.enabled],
        "prompt_version": prompt_for_project(project).version,
    })


@login_required
@require_POST
def skip_candidates(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    form = ItemSelectionForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError("Bad item selection.")
        n = items_start_annotation(project=project, item_ids=_selected_ids(form))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{n} item(s) moved to annotation without candidates.")
    return redirect("candidate_jobs", slug=project.slug)


@login_required
def job_page(request, slug, job_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    job = job_get_for_project(project=project, job_id=job_id)
    context = {"project": project, "progress": job_progress(job=job), "failures": job_failures(job=job, limit=50)}
    template = "candidates/job.html#progress" if request.htmx else "candidates/job.html"
    return render(request, template, context)


@login_required
@require_POST
def job_retry(request, slug, job_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    job = job_get_for_project(project=project, job_id=job_id)
    n = candidate_job_retry_failed(job=job)
    messages.info(request, f"{n} failed task(s) queued again." if n else "No failed task to retry.")
    return redirect("candidate_job", slug=project.slug, job_id=job.pk)


@login_required
def item_candidates_page(request, slug, item_id):
    """Every stored candidate of an item with its model: leads and researchers only."""
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD, Role.RESEARCHER])
    item = item_get_for_user(user=request.user, project=project, item_id=item_id)
    return render(request, "candidates/item_candidates.html", {
        "project": project, "item": item, "candidates": candidate_history_with_identity(item=item),
    })


@login_required
def item_candidates_anonymous(request, slug, item_id):
    """The annotator's view: "Candidate A/B/C" with schema fields only (an htmx fragment)."""
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.ANNOTATOR])
    item = item_get_for_user(user=request.user, project=project, item_id=item_id)
    annotator_item_check(user=request.user, item=item)
    return render(request, "candidates/_anonymous.html#candidates", {
        "project": project, "item": item,
        "candidates": anonymous_rows(schema=project.get_schema(), candidates=candidates_for_annotator(item=item, user=request.user)),
    })


def anonymous_rows(*, schema, candidates) -> list[dict]:
    """Display rows for anonymized candidates: built only from letter + normalized fields."""
    rows = []
    for cand in candidates:
        values = []
        for spec in schema.fields:
            if spec["name"] not in cand.fields:
                continue
            value = cand.fields[spec["name"]]
            if spec["type"] == "boxes":
                shown = "; ".join("[" + ", ".join(map(str, b)) + "]" for b in value) or "—"
            elif isinstance(value, list):
                shown = ", ".join(map(str, value)) or "—"
            else:
                shown = "—" if value is None else str(value)
            values.append({"name": spec["name"], "label": spec.get("label") or spec["name"], "value": shown})
        rows.append({"letter": cand.letter, "values": values, "json": json.dumps(cand.fields, ensure_ascii=False)})
    return rows
