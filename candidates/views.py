"""Lead pages (providers, jobs, progress) and the annotator's anonymized candidate fragment."""

from __future__ import annotations

import os

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from candidates.access import job_get_for_project, provider_get_for_project
from candidates.forms import ItemSelectionForm, ProviderForm
from candidates.prompts import prompt_for_project
from candidates.ratelimit import backend_name
from candidates.selectors import candidate_history_with_identity, jobs_for_project, providers_for_project
from candidates.services import (
    candidate_job_retry_failed,
    candidate_job_start,
    items_start_annotation,
    parse_item_ids,
    provider_create,
    provider_set_enabled,
    provider_update,
    replay_file_save,
)
from core.errors import Invalid
from core.views import form_errors, service_errors
from projects.access import item_get_for_user, project_get_for_user
from projects.models import Item, Role, Stage

LEAD = [Role.LEAD]


def _provider_rows(project):
    # Whether the key variable is set is checked in this (web) process; workers read their own
    # environment. The value itself never leaves os.environ.
    return [
        {"provider": p, "key_set": bool(p.api_key_env and os.environ.get(p.api_key_env))}
        for p in providers_for_project(project=project)
    ]


def _provider_input(project, form) -> dict:
    """The form's fields for the service; an uploaded replay file is stored first and named."""
    data = dict(form.cleaned_data)
    upload = data.pop("replay_upload", None)
    if upload is not None:
        data["replay_file"] = replay_file_save(project=project, uploaded_file=upload)
    return data


@login_required
@require_http_methods(["GET", "POST"])
def providers_page(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    form = ProviderForm(request.POST or None, request.FILES or None, initial={"enabled": True})
    if request.method == "POST" and form.is_valid():
        with form_errors(form):
            provider = provider_create(project=project, **_provider_input(project, form))
            messages.success(request, f"Provider {provider.name} added.")
            return redirect("candidate_providers", slug=project.slug)
    return render(
        request,
        "candidates/providers.html",
        {
            "project": project,
            "rows": _provider_rows(project),
            "form": form,
            "limiter": backend_name(),
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def provider_edit(request, slug, provider_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    provider = provider_get_for_project(project=project, provider_id=provider_id)
    initial = {f: getattr(provider, f) for f in ProviderForm.base_fields if f != "replay_upload"}
    form = ProviderForm(request.POST or None, request.FILES or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        with form_errors(form):
            provider_update(provider=provider, **_provider_input(project, form))
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
        with form_errors(form):
            job = candidate_job_start(project=project, user=request.user, item_ids=_selected_ids(form))
            messages.success(request, f"Candidate job {job.pk} started.")
            return redirect("candidate_job", slug=project.slug, job_id=job.pk)
    return render(
        request,
        "candidates/jobs.html",
        {
            "project": project,
            "form": form,
            "skip_form": ItemSelectionForm(),
            "jobs": jobs_for_project(project=project)[:50],
            "new_items": Item.objects.filter(project=project, stage=Stage.NEW).count(),
            "enabled_providers": [p for p in providers_for_project(project=project) if p.enabled],
            "prompt_version": prompt_for_project(project).version,
        },
    )


@login_required
@require_POST
@service_errors
def skip_candidates(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    form = ItemSelectionForm(request.POST)
    if not form.is_valid():
        raise Invalid("Bad item selection: give item ids separated by commas or spaces.")
    n = items_start_annotation(project=project, item_ids=_selected_ids(form))
    messages.success(request, f"{n} item(s) moved to annotation without candidates.")
    return redirect("candidate_jobs", slug=project.slug)


@login_required
def job_page(request, slug, job_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    job = job_get_for_project(project=project, job_id=job_id)
    return render(request, "candidates/job.html", {"project": project, "job": job})


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
    return render(
        request,
        "candidates/item_candidates.html",
        {
            "project": project,
            "item": item,
            "candidates": candidate_history_with_identity(item=item),
        },
    )
