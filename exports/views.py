"""HTML pages: near-duplicate review queue, split preview, releases, release diff, API token."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import Invalid, ServiceError
from core.views import service_errors
from exports.image_access import item_image_get_for_user
from exports.models import PairStatus, ReleaseSettings
from exports.selectors import (
    candidate_groups,
    dedup_scan_latest,
    export_jobs_for_project,
    hub_pushes_for_release,
    items_not_scanned,
    pair_counts,
    pair_get_for_project,
    pairs_for_review,
    release_diff,
    release_dir,
    release_files,
    release_get_for_project,
    release_settings_get,
    releases_for_project,
    split_plan,
)
from exports.services import (
    SETTINGS_FIELDS,
    api_token_get_or_create,
    api_token_regenerate,
    api_token_revoke,
    export_job_start,
    hub_push_start,
    near_duplicate_pair_review,
    near_duplicates_scan_start,
    release_settings_update,
)
from projects.access import project_get_for_user
from projects.models import Role

LEAD = [Role.LEAD]
PAIR_JUDGES = [Role.LEAD, Role.REVIEWER]
# Releases hold gold and model identities: leads and researchers only (SPEC section 4).
RELEASE_READERS = [Role.LEAD, Role.RESEARCHER]
PAIRS_PER_PAGE = 60  # a page holds about a minute of keyboard judging


@login_required
@require_GET
def duplicates_page(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=PAIR_JUDGES)
    status = request.GET.get("status", PairStatus.UNREVIEWED)
    if status not in PairStatus.values:
        status = PairStatus.UNREVIEWED
    page = Paginator(pairs_for_review(project=project, status=status), PAIRS_PER_PAGE).get_page(request.GET.get("page"))
    groups = candidate_groups(project=project)
    for pair in page:
        pair.group = groups.get(pair.item_a_id)
    scan = dedup_scan_latest(project=project)
    return render(
        request,
        "exports/duplicates.html",
        {
            "project": project,
            "page": page,
            "status": status,
            "statuses": PairStatus.choices,
            "counts": pair_counts(project=project),
            "scan": scan,
            "not_scanned": items_not_scanned(project=project),
            "is_lead": Role.LEAD in project.user_roles,
        },
    )


@login_required
@require_POST
def duplicate_review(request, slug, pair_id):
    """Judge one pair (htmx: answers the pair's card; 409 with the current state if stale)."""
    project = project_get_for_user(user=request.user, slug=slug, roles=PAIR_JUDGES)
    pair = pair_get_for_project(project=project, pair_id=pair_id)
    status, error = 200, None
    try:
        pair = near_duplicate_pair_review(
            pair=pair,
            reviewer=request.user,
            decision=request.POST.get("decision", ""),
            expected_status=request.POST.get("expected_status", ""),
        )
    except ServiceError as exc:  # the pair's card shows the error and the pair's current state
        status, error = exc.status, exc.message
        pair = pair_get_for_project(project=project, pair_id=pair_id)
    pair.group = candidate_groups(project=project).get(pair.item_a_id)
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect("duplicates_page", slug=project.slug)
    return render(
        request, "exports/duplicates.html#pair", {"project": project, "pair": pair, "error": error}, status=status
    )


@login_required
@require_POST
def duplicates_scan(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    near_duplicates_scan_start(project=project, user=request.user)
    messages.info(request, "Near-duplicate scan started; new pairs appear in the queue when it finishes.")
    return redirect("duplicates_page", slug=project.slug)


@login_required
@require_GET
def splits_page(request, slug):
    """The split the next release would get, with its integrity check (computed now)."""
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    plan = split_plan(project=project)
    return render(
        request,
        "exports/splits.html",
        {
            "project": project,
            "plan": plan,
            "table": plan.stratum_table(),
            "groups": plan.groups_summary(limit=200),
            "integrity": plan.integrity.as_dict(),
            "released": int(plan.released.sum()),
        },
    )


def _releases_context(project, *, is_lead: bool, settings_values=None, settings_errors=None) -> dict:
    settings_errors = settings_errors or {}
    form = []
    if is_lead:
        current = release_settings_get(project=project)
        values = settings_values or {name: getattr(current, name) for name in SETTINGS_FIELDS}
        for name in SETTINGS_FIELDS:
            field = ReleaseSettings._meta.get_field(name)
            form.append(
                {
                    "name": name,
                    "label": field.verbose_name.capitalize(),
                    "help": field.help_text,
                    "long": field.get_internal_type() == "TextField",
                    "value": values.get(name, ""),
                    "error": settings_errors.get(name, ""),
                }
            )
    return {
        "project": project,
        "releases": releases_for_project(project=project),
        "is_lead": is_lead,
        "jobs": export_jobs_for_project(project=project) if is_lead else [],
        "settings_form": form,
        "settings_errors": settings_errors,
    }


@login_required
@require_GET
def releases_page(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=RELEASE_READERS)
    is_lead = Role.LEAD in project.user_roles
    return render(request, "exports/releases.html", _releases_context(project, is_lead=is_lead))


@login_required
@require_POST
def release_settings_save(request, slug):
    """The lead's words for the card and datasheet of the next releases (errors per field)."""
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    data = {name: request.POST.get(name, "") for name in SETTINGS_FIELDS}
    try:
        release_settings_update(project=project, user=request.user, data=data)
    except Invalid as exc:
        context = _releases_context(project, is_lead=True, settings_values=data, settings_errors=exc.errors or {})
        return render(request, "exports/releases.html", context)  # the form again, errors by its fields
    messages.info(request, "Release settings saved: the next release's card and datasheet use them.")
    return redirect("releases_page", slug=project.slug)


@login_required
@require_POST
@service_errors
def release_push_start(request, slug, number):
    """Push a published release to the Hugging Face Hub, as a job (core.jobs)."""
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    release = release_get_for_project(project=project, number=number)
    hub_push_start(release=release, user=request.user, repo_id=request.POST.get("repo_id", ""))
    messages.info(request, "Push to the Hugging Face Hub started.")
    return redirect("release_page", slug=project.slug, number=release.number)


@login_required
@require_POST
@service_errors
def release_build_start(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    export_job_start(project=project, user=request.user)
    messages.info(request, "Release build started.")
    return redirect("releases_page", slug=project.slug)


@login_required
@require_GET
def release_page(request, slug, number):
    project = project_get_for_user(user=request.user, slug=slug, roles=RELEASE_READERS)
    release = release_get_for_project(project=project, number=number)
    readme = (release_dir(release) / "README.md").read_text(encoding="utf-8")
    others = [r.number for r in releases_for_project(project=project) if r.number != release.number]
    is_lead = Role.LEAD in project.user_roles
    return render(
        request,
        "exports/release.html",
        {
            "project": project,
            "is_lead": is_lead,
            "pushes": hub_pushes_for_release(release=release) if is_lead else [],
            "hub_repo": release_settings_get(project=project).hub_repo if is_lead else "",
            "release": release,
            "files": release_files(release),
            "readme": readme,
            "manifest": release.manifest,
            "others": others,
        },
    )


@login_required
@require_GET
def release_diff_page(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=RELEASE_READERS)
    try:
        a, b = int(request.GET.get("from", "")), int(request.GET.get("to", ""))
    except ValueError:
        raise Http404("Choose two releases to compare (?from=1&to=2)") from None
    old = release_get_for_project(project=project, number=a)
    new = release_get_for_project(project=project, number=b)
    return render(
        request,
        "exports/diff.html",
        {"project": project, "old": old, "new": new, "diff": release_diff(old=old, new=new)},
    )


@login_required
@require_http_methods(["GET", "POST"])
def api_token_page(request):
    """The user's own REST token (DRF TokenAuthentication): see it, create, replace or revoke it."""
    from rest_framework.authtoken.models import Token

    if request.method == "POST":
        action = request.POST.get("action")
        if action == "regenerate":
            api_token_regenerate(user=request.user)
            messages.info(request, "New token created; the old one no longer works.")
        elif action == "revoke":
            if api_token_revoke(user=request.user):
                messages.info(request, "Token revoked: it no longer works. Create a new one when you need it.")
        else:
            api_token_get_or_create(user=request.user)
        return redirect("api_token")
    token = Token.objects.filter(user=request.user).first()
    return render(request, "exports/token.html", {"token": token})


@login_required
@require_GET
def item_image(request, slug, item_id, variant=None):
    """An item's image (or, with ``variant``, a derived image of it such as the text-free one),
    to whom exports.image_access allows it, as an image (never as HTML, whatever the bytes).
    It lives here, in the top app, because the rule reads releases, near-duplicate pairs,
    adjudication tasks and annotations."""
    project = project_get_for_user(user=request.user, slug=slug)
    try:
        image = item_image_get_for_user(user=request.user, project=project, item_id=item_id, variant=variant)
        fh = open(image.path, "rb")  # noqa: SIM115 - FileResponse closes it
    except (OSError, ValueError):
        raise Http404("Image file missing") from None
    response = FileResponse(fh, content_type=image.content_type)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Content-Disposition"] = "inline"
    response["Cache-Control"] = "private, max-age=3600"
    return response
