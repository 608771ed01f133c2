from __future__ import annotations

from collections import defaultdict

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from projects.access import project_get_for_user
from projects.forms import ImportUploadForm
from projects.models import ImportJob, Role, Stage
from projects.selectors import import_jobs_for_project, memberships_for_user, project_stage_counts
from projects.services import import_job_create, upload_save


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
        try:
            path = upload_save(uploaded_file=form.cleaned_data["file"])
        except ValueError as exc:
            form.add_error("file", str(exc))
        else:
            from projects.tasks import import_job_task

            with transaction.atomic():
                job = import_job_create(
                    project=project, user=request.user, source_name=form.cleaned_data["file"].name, upload_path=path
                )
                transaction.on_commit(lambda: import_job_task.delay(job.pk))
            messages.info(request, f"Import of {job.source_name} started.")
            return redirect("import_page", slug=project.slug)
    jobs = import_jobs_for_project(project=project)
    return render(request, "projects/import.html", {"project": project, "form": form, "jobs": jobs})


@login_required
def import_job_partial(request, slug, job_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    job = get_object_or_404(ImportJob, project=project, pk=job_id)
    return render(request, "projects/import.html#job", {"project": project, "job": job})
