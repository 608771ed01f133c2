from __future__ import annotations

import json
from collections import defaultdict

from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import NotFound
from core.jobs import job_cancel
from core.views import caught_service_error, form_errors
from projects.access import item_get_for_user, project_get_for_user
from projects.forms import GuidelineForm, ImportUploadForm, InvitationAcceptForm, ProjectCreateForm, VariantUploadForm
from projects.guideline import guideline_diff, render_markdown
from projects.imports import import_job_start
from projects.members import invitation_accept, invitation_for_token
from projects.models import GuidelineVersion, Role, Stage
from projects.ocr import item_variant_upload, ocr_job_start
from projects.presets import PRESETS
from projects.selectors import (
    import_jobs_for_project,
    job_get_for_project,
    memberships_for_user,
    ocr_overview,
    project_stage_counts,
    projects_led_by,
    workflow_stage_counts,
)
from projects.services import (
    CREATE_PERMISSION,
    creator_invite,
    guideline_save,
    project_create_for_user,
    project_creator_set,
    user_can_create_projects,
)


@login_required
def home(request):
    by_project = defaultdict(list)
    for m in memberships_for_user(user=request.user):
        by_project[m.project].append(m.get_role_display())
    return render(
        request,
        "projects/home.html",
        {"projects": dict(by_project), "can_create": user_can_create_projects(request.user)},
    )


@login_required
@require_http_methods(["GET", "POST"])
def project_create_page(request):
    if not user_can_create_projects(request.user):
        raise PermissionDenied(
            "You may not create projects: ask the site staff for the “can create projects” permission."
        )
    form = ProjectCreateForm(
        request.POST or None,
        presets=PRESETS,
        led_projects=projects_led_by(user=request.user),
        initial={"preset": "custom"},
    )
    if request.method == "POST" and form.is_valid():
        with form_errors(form):
            project = project_create_for_user(
                user=request.user,
                name=form.cleaned_data["name"],
                slug=form.cleaned_data["slug"],
                preset=form.cleaned_data["preset"],
                copy_from_slug=form.cleaned_data["copy_from"],
            )
            messages.success(request, f"Project {project.name} created: set up its schema, guideline and members.")
            return redirect("project_detail", slug=project.slug)
    return render(request, "projects/create.html", {"form": form, "presets": PRESETS})


@login_required
@require_http_methods(["GET", "POST"])
def guideline_page(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    form = GuidelineForm(
        request.POST or None, initial={"text": project.guideline, "version": project.guideline_version}
    )
    preview = None
    if request.method == "POST" and form.is_valid():
        if request.POST.get("action") == "preview":
            preview = render_markdown(form.cleaned_data["text"])
        else:
            with form_errors(form):
                version = guideline_save(
                    project=project,
                    text=form.cleaned_data["text"],
                    note=form.cleaned_data["note"],
                    user=request.user,
                    expected_version=form.cleaned_data["version"],
                )
                messages.success(request, f"Guideline version {version.version} saved.")
                return redirect("guideline_page", slug=project.slug)
    versions = list(GuidelineVersion.objects.filter(project=project).select_related("created_by").order_by("-version"))
    return render(
        request,
        "projects/guideline.html",
        {"project": project, "form": form, "preview": preview, "versions": versions},
    )


@login_required
@require_http_methods(["GET", "POST"])
def guideline_preview(request, slug):
    """htmx: the Markdown of the editor, rendered as annotators will see it."""
    project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    return render(
        request, "projects/_guideline_preview.html", {"html": render_markdown(request.POST.get("text", "")[:100_000])}
    )


@login_required
def guideline_version_page(request, slug, version):
    project = project_get_for_user(
        user=request.user, slug=slug, roles=[Role.LEAD, Role.ANNOTATOR, Role.REVIEWER, Role.AUDITOR]
    )
    rows = {v.version: v for v in GuidelineVersion.objects.filter(project=project, version__in=[version - 1, version])}
    if version not in rows:
        raise Http404("No such guideline version")
    previous = rows.get(version - 1)
    return render(
        request,
        "projects/guideline_version.html",
        {
            "project": project,
            "version": rows[version],
            "diff": guideline_diff(previous.text, rows[version].text) if previous else None,
        },
    )


@require_http_methods(["GET", "POST"])
def invitation_page(request, token):
    """The invitee's page: choose a username and a password; the link works once. A spent,
    revoked or expired link answers 404 with one message (it reveals nothing else)."""
    try:
        invitation = invitation_for_token(token=token)
    except NotFound as exc:
        return render(request, "projects/invitation.html", {"invalid": exc.message}, status=404)
    form = InvitationAcceptForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with form_errors(form):
            user, project = invitation_accept(token=token, **form.cleaned_data)
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(request, f"Welcome, {user.username}: you are now a member of {project.name}.")
            return redirect("project_detail", slug=project.slug)
    return render(request, "projects/invitation.html", {"invitation": invitation, "form": form})


@login_required
@require_http_methods(["GET", "POST"])
def staff_creators_page(request):
    """Site staff decide who may create projects."""
    if not request.user.is_staff:
        raise PermissionDenied("Only site staff decide who may create projects.")
    User = get_user_model()
    link = None
    if request.method == "POST" and request.POST.get("action") == "invite":
        with caught_service_error() as error:
            new, uidb64, token = creator_invite(
                staff=request.user, username=request.POST.get("username", ""), email=request.POST.get("email", "")
            )
            link = request.build_absolute_uri(reverse("set_password", args=[uidb64, token]))
            messages.success(request, f"Account {new.username} made; it may create projects. Send them the link below.")
        if error.exc:
            messages.error(request, error.message + " " + " ".join(f"{k}: {v}" for k, v in error.errors.items()))
    elif request.method == "POST":
        user = User.objects.filter(
            pk=request.POST.get("user", "0") if request.POST.get("user", "").isdigit() else 0
        ).first()
        if user is None:
            messages.error(request, "No such user.")
        else:
            allowed = request.POST.get("allowed") == "1"
            project_creator_set(staff=request.user, user=user, allowed=allowed)
            messages.success(request, f"{user.username} {'may' if allowed else 'may no longer'} create projects.")
        return redirect("staff_creators")
    query = request.GET.get("q", "").strip()[:100]
    users = User.objects.filter(is_active=True).order_by("username")
    if query:
        users = users.filter(username__icontains=query) | users.filter(email__icontains=query)
    app, codename = CREATE_PERMISSION.split(".")
    creators = set(
        User.objects.filter(
            user_permissions__codename=codename, user_permissions__content_type__app_label=app
        ).values_list("pk", flat=True)
    )
    rows = [(u, u.is_superuser or u.pk in creators) for u in users[:200]]
    return render(request, "projects/staff_creators.html", {"rows": rows, "query": query, "link": link})


@login_required
def project_detail(request, slug):
    project = project_get_for_user(user=request.user, slug=slug)
    context = {"project": project, "roles": project.user_roles}
    if Role.LEAD in project.user_roles:
        counts = project_stage_counts(project=project)
        context["stages"] = [(label, counts.get(value, 0)) for value, label in Stage.choices]
        context["workflow_stages"] = workflow_stage_counts(project=project)
        context["has_model_stage"] = bool(project.get_workflow().model_stages())
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
