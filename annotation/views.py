"""Annotation workspace pages (htmx + a small ES module, static/annotation/).

Every view checks project membership and role first (projects.access: non-member 404, wrong
role 403), then fetches the caller's own annotation through a selector that scopes it to them.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.template.loader import get_template
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.models import Kind
from annotation.selectors import (
    FieldView,
    annotation_get_for_annotator,
    annotation_item_check,
    annotator_preference,
    annotator_progress,
    annotator_worklist,
    audit_next_open,
    audit_worklist,
    item_lang,
    workspace_for_annotator,
)
from annotation.services import (
    annotation_open,
    annotation_skip,
    annotator_preference_update,
    assignment_claim_next,
    content_warning_accept,
    guideline_seen,
)
from candidates.selectors import candidates_for_annotator
from core.views import service_errors
from projects.access import item_get_for_user, project_get_for_user
from projects.models import GuidelineVersion, Role
from projects.services import skip_reasons_of

ROLE_FOR_KIND = {Kind.ANNOTATION: Role.ANNOTATOR, Kind.AUDIT: Role.AUDITOR}


def _gate(request, project):
    """(preference, redirect): the content warning comes before the first item (Meme3W Appendix D)."""
    pref = annotator_preference(user=request.user, project=project)
    if pref is None or pref.content_warning_accepted_at is None:
        url = reverse("annotate_warning", args=[project.slug]) + "?next=" + request.get_full_path()
        return pref, redirect(url)
    return pref, None


def _guideline_notice(project, pref):
    """The guideline version the annotator has not read yet (with its change note), or None."""
    if pref is None or pref.guideline_seen_version >= project.guideline_version:
        return None
    return GuidelineVersion.objects.filter(project=project, version=project.guideline_version).first() or {
        "version": project.guideline_version,
        "note": "",
    }


@login_required
@require_POST
def annotate_guideline_seen(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.ANNOTATOR, Role.AUDITOR])
    try:
        version = int(request.POST.get("version", ""))
    except ValueError:
        version = project.guideline_version
    guideline_seen(user=request.user, project=project, version=version)
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        back = reverse("annotate_home", args=[project.slug])
    return redirect(back)


@login_required
@require_GET
def annotate_home(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.ANNOTATOR])
    pref, gate = _gate(request, project)
    if gate:
        return gate
    return render(
        request,
        "annotation/home.html",
        {
            "project": project,
            "worklist": annotator_worklist(user=request.user, project=project),
            "progress": annotator_progress(user=request.user, project=project),
            "pref": pref,
            "guideline_notice": _guideline_notice(project, pref),
            "focus_next": True,  # Enter starts (the panel inside the workspace never takes the focus)
        },
    )


@login_required
@require_GET
def annotate_progress(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.ANNOTATOR])
    return render(
        request,
        "annotation/home.html#progress",
        {
            "project": project,
            "progress": annotator_progress(user=request.user, project=project),
        },
    )


#: Rendered field widgets (the workspace's ``field`` partial), keyed on everything that partial
#: reads: the field view's whole content, value included. An edited schema, another value or
#: another visibility is another key, so a kept widget is never stale, and nothing in it depends
#: on the user or the request (templates/fields/* read only ``f`` and ``prefix``). Rendering
#: the widgets was about a third of the page's template time; a fresh item's fields are the
#: same for everyone. Per process, bounded; a long value (text, boxes) is rendered, not kept.
_FIELD_HTML: dict[tuple, SafeString] = {}
_FIELD_HTML_MAX = 4096
_FIELD_VALUE_MAX = 200


def _field_key(f: FieldView) -> tuple | None:
    value = json.dumps(f.value, ensure_ascii=False)
    if len(value) > _FIELD_VALUE_MAX:
        return None
    return (
        f.template,
        f.name,
        f.label,
        f.help,
        f.required,
        f.config_json,
        json.dumps(f.visible_if, ensure_ascii=False),
        f.visible,
        value,
        f.roles,
    )


def field_html(f: FieldView) -> SafeString:
    """One field of the workspace form as the ``field`` partial renders it."""
    key = _field_key(f)
    found = _FIELD_HTML.get(key) if key is not None else None
    if found is None:
        found = get_template("annotation/workspace.html#field").render({"f": f})
        if key is not None:
            if len(_FIELD_HTML) >= _FIELD_HTML_MAX:
                _FIELD_HTML.clear()
            _FIELD_HTML[key] = found
    return found


@login_required
@require_POST
def annotate_next(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.ANNOTATOR])
    _, gate = _gate(request, project)
    if gate:
        return gate
    result = assignment_claim_next(annotator=request.user, project=project)
    if result.outcome == "resumed":
        messages.info(request, "You have an unfinished item: submit or skip it to get a new one.")
    if result.annotation is not None:
        return redirect("annotate_item", slug=project.slug, item_id=result.annotation.item_id)
    if result.outcome == "break":
        messages.info(
            request,
            "You have reached this session's item limit set by your project lead. "
            "Take a break: log out and back in later to continue.",
        )
    else:
        messages.info(request, "No items are waiting for you right now. Thank you!")
    return redirect("annotate_home", slug=project.slug)


def _workspace_page(request, slug, item_id, kind):
    project = project_get_for_user(user=request.user, slug=slug, roles=[ROLE_FOR_KIND[kind]])
    pref, gate = _gate(request, project)
    if gate:
        return gate
    annotation = annotation_open(
        annotation=annotation_get_for_annotator(user=request.user, project=project, item_id=item_id, kind=kind)
    )
    ws = workspace_for_annotator(annotation=annotation, audit=kind == Kind.AUDIT)
    api = "api_audit" if kind == Kind.AUDIT else "api_annotate"
    return render(
        request,
        "annotation/workspace.html",
        {
            "project": project,
            "ws": ws,
            "item": ws.item,
            "state_json": json.dumps(ws.state),
            "fields_html": mark_safe("".join(field_html(f) for f in ws.fields)),
            "candidates_json": json.dumps({c.letter: c.values for c in ws.candidates}),
            "has_boxes": ws.has_region,
            "has_mention": ws.has_mention,
            "blur": bool(pref and pref.blur_images),
            "auto_advance": pref.auto_advance if pref else True,
            "item_lang": item_lang(ws.item),
            "skip_reasons": skip_reasons_of(project),
            "guideline_notice": _guideline_notice(project, pref),
            "draft_url": reverse(f"{api}_draft", args=[project.slug, ws.item.pk]),
            "submit_url": reverse(f"{api}_submit", args=[project.slug, ws.item.pk]),
            "storage_key": f"concord:{project.slug}:{kind}:{ws.item.pk}:{request.user.pk}",
        },
    )


@login_required
@require_GET
def annotate_item(request, slug, item_id):
    return _workspace_page(request, slug, item_id, Kind.ANNOTATION)


@login_required
@require_GET
def audit_item(request, slug, item_id):
    return _workspace_page(request, slug, item_id, Kind.AUDIT)


@login_required
@require_GET
def audit_home(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.AUDITOR])
    _, gate = _gate(request, project)
    if gate:
        return gate
    return render(
        request,
        "annotation/audit_home.html",
        {
            "project": project,
            "audits": audit_worklist(user=request.user, project=project),
        },
    )


@login_required
@require_POST
def audit_next(request, slug):
    """The auditor's next open audit item (after a submit with "next item after submit" on)."""
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.AUDITOR])
    _, gate = _gate(request, project)
    if gate:
        return gate
    nxt = audit_next_open(user=request.user, project=project)
    if nxt is None:
        messages.info(request, "No audit items are waiting for you. Thank you!")
        return redirect("audit_home", slug=project.slug)
    return redirect("audit_item", slug=project.slug, item_id=nxt.item_id)


def _item_page(request, slug, item_id):
    page = "audit_item" if request.POST.get("kind") == Kind.AUDIT else "annotate_item"
    return reverse(page, args=[slug, item_id])


@login_required
@require_POST
@service_errors(back=_item_page)
def annotate_skip(request, slug, item_id):
    kind = Kind.AUDIT if request.POST.get("kind") == Kind.AUDIT else Kind.ANNOTATION
    project = project_get_for_user(user=request.user, slug=slug, roles=[ROLE_FOR_KIND[kind]])
    annotation = annotation_get_for_annotator(user=request.user, project=project, item_id=item_id, kind=kind)
    annotation_skip(
        annotator=request.user,
        item=annotation.item,
        reason=request.POST.get("reason", ""),
        note=request.POST.get("note", ""),
        kind=kind,
    )
    messages.info(request, "Item skipped: it goes to someone else and will not come back to you.")
    return redirect("audit_home" if kind == Kind.AUDIT else "annotate_home", slug=project.slug)


@login_required
@require_http_methods(["GET", "POST"])
def annotate_warning(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.ANNOTATOR, Role.AUDITOR])
    target = request.POST.get("next") or request.GET.get("next") or ""
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = ""
    if request.method == "POST":
        content_warning_accept(user=request.user, project=project, blur_images=request.POST.get("blur_images") == "on")
        if not target:
            target = reverse(
                "annotate_home" if Role.ANNOTATOR in project.user_roles else "audit_home", args=[project.slug]
            )
        return redirect(target)
    return render(request, "annotation/warning.html", {"project": project, "next": target})


@login_required
@require_POST
def annotate_preferences(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.ANNOTATOR, Role.AUDITOR])
    # One setting per form (each checkbox is its own htmx form); older forms send only blur_images.
    setting = request.POST.get("setting", "blur_images")
    if setting not in ("blur_images", "auto_advance"):
        setting = "blur_images"
    pref = annotator_preference_update(
        user=request.user, project=project, **{setting: request.POST.get(setting) == "on"}
    )
    if not request.htmx:
        return redirect("annotate_home" if Role.ANNOTATOR in project.user_roles else "audit_home", slug=project.slug)
    partial = "blur-toggle" if setting == "blur_images" else "auto-advance"
    return render(
        request,
        f"annotation/workspace.html#{partial}",
        {
            "project": project,
            "blur": pref.blur_images,
            "auto_advance": pref.auto_advance,
        },
    )


@login_required
def item_candidates_anonymous(request, slug, item_id):
    """The annotator's view: "Candidate A/B/C" with schema fields only (an htmx fragment)."""
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.ANNOTATOR])
    item = item_get_for_user(user=request.user, project=project, item_id=item_id)
    annotation_item_check(user=request.user, item=item)
    return render(
        request,
        "candidates/_anonymous.html#candidates",
        {
            "project": project,
            "item": item,
            "candidates": anonymous_rows(
                schema=project.get_schema(), candidates=candidates_for_annotator(item=item, user=request.user)
            ),
        },
    )


def anonymous_rows(*, schema, candidates) -> list[dict]:
    """Display rows for anonymized candidates: built only from letter + normalized fields."""
    rows = []
    for cand in candidates:
        values = []
        for spec in schema.fields:
            if spec["name"] not in cand.fields:
                continue
            value = cand.fields[spec["name"]]
            shown = schema.type_of(spec["name"]).display_text(spec, value)
            values.append({"name": spec["name"], "label": spec.get("label") or spec["name"], "value": shown})
        rows.append({"letter": cand.letter, "values": values, "json": json.dumps(cand.fields, ensure_ascii=False)})
    return rows
