from __future__ import annotations

import json
from collections import defaultdict

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from core.jobs import job_cancel
from core.views import form_errors
from projects.access import item_get_for_user, project_get_for_user
from projects.forms import ImportUploadForm, VariantUploadForm
from projects.imports import import_job_start
from projects.models import Role, Stage
from projects.ocr import item_variant_upload, ocr_job_start
from projects.selectors import (
    import_jobs_for_project,
    job_get_for_project,
    memberships_for_user,
    ocr_overview,
    project_stage_counts,
)


@login_required
def home(request):
    by_project = defaultdict(list)
    for m in memberships_for_user(user=request.user):
        by_project[m.project].append(m.get_role_display())
    return render(request, "projects/home.html", {"projects": dict(by_project)})


@login_required
def project_detail(request, slug):
    project = project_get_for_user(user=request.user, slug=slug)
    context = {"project": project, "roles": project.user_roles}
    if Role.LEAD in project.user_roles:
        counts = project_stage_counts(project=project)
        context["stages"] = [(label, counts.get(value, 0)) for value, label in Stage.choices]
        context["schema_fields"] = project.schema["fields"]
    return render(request, "projects/project_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def import_page(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    form = ImportUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        with form_errors(form):
            job = import_job_start(project=project, user=request.user, uploaded_file=form.cleaned_data["file"])
            messages.info(request, f"Import of {job.source_name} started.")
            return redirect("import_page", slug=project.slug)
    jobs = import_jobs_for_project(project=project)
    return render(
        request,
        "projects/import.html",
        {
            "project": project,
            "form": form,
            "jobs": jobs,
            "ocr": ocr_overview(project=project),
            "variant_form": VariantUploadForm(),
        },
    )


@login_required
@require_POST
def ocr_start(request, slug):
    """Read the images of the items that have no OCR yet (and paint their text-free variants)."""
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    job = ocr_job_start(project=project, user=request.user)
    messages.info(request, f"OCR run #{job.pk} queued: it reads the items that have no OCR yet.")
    return redirect(reverse("import_page", args=[project.slug]) + "#ocr")


@login_required
@require_POST
def variant_upload(request, slug):
    """A lead's own text-free image of an item (replaces the painted one)."""
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    form = VariantUploadForm(request.POST, request.FILES)
    if form.is_valid():
        with form_errors(form):
            try:
                item = item_get_for_user(user=request.user, project=project, item_id=form.cleaned_data["item"])
            except Http404:
                item = None
                form.add_error("item", f"This project has no item {form.cleaned_data['item']}.")
            f = form.cleaned_data["file"]
            if item is None:
                pass
            elif f.size > 50 * 1024 * 1024:
                form.add_error("file", "The file is larger than 50 MB.")
            else:
                item_variant_upload(item=item, kind="textfree", data=f.read(), user=request.user)
                messages.info(request, f"Text-free image of item {item.pk} replaced by yours.")
                return redirect(reverse("import_page", args=[project.slug]) + "#ocr")
    jobs = import_jobs_for_project(project=project)
    context = {
        "project": project,
        "form": ImportUploadForm(),
        "jobs": jobs,
        "ocr": ocr_overview(project=project),
        "variant_form": form,
    }
    return render(request, "projects/import.html", context, status=400)


def _job_response(request, project, job):
    response = render(
        request,
        "jobs/_progress.html",
        {
            "project": project,
            "job": job,
            "can_cancel": Role.LEAD in project.user_roles,
        },
    )
    if job.finished:
        # Regions of the page that show the job's result refresh themselves on this event.
        response["HX-Trigger"] = json.dumps({"job-finished": {"kind": job.kind, "id": job.pk, "status": job.status}})
    return response


@login_required
def job_partial(request, slug, kind, job_id):
    """The one progress partial of any job (polled by htmx while the job runs)."""
    project = project_get_for_user(user=request.user, slug=slug)
    job = job_get_for_project(user=request.user, project=project, kind=kind, job_id=job_id)
    return _job_response(request, project, job)


@login_required
@require_POST
def job_cancel_view(request, slug, kind, job_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    job = job_cancel(job_get_for_project(user=request.user, project=project, kind=kind, job_id=job_id))
    if request.htmx:
        return _job_response(request, project, job)
    messages.info(request, f"{job.title}: {job.get_status_display().lower()}.")
    back = request.headers.get("Referer", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = reverse("project_detail", args=[slug])
    return redirect(back)
