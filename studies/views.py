"""Pages of the reference-independence study (htmx-free forms; keyboard shortcuts in
static/studies/study.js).

Access (projects.access: non-member 404, wrong role 403): the study pages and every action on
them are the leads'; a participant's page is theirs alone and shows only the image
(studies.selectors.participant_workspace); a judge's page, the judge's; an adjudication page,
a lead's or reviewer's who is not involved with the item. Images are served by study-specific
URLs that name neither the item nor the study item for participants.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.views import service_errors
from projects.access import project_get_for_user
from projects.imaging import CONTENT_TYPES, image_path
from projects.models import Role
from studies import selectors, services
from studies.models import Reexplanation, Study, StudyItem, Verdict

LEAD = [Role.LEAD]
MEMBERS = [Role.LEAD, Role.REVIEWER, Role.ANNOTATOR, Role.RESEARCHER]


def _study(request, slug, study_id, roles):
    project = project_get_for_user(user=request.user, slug=slug, roles=roles)
    return project, selectors.study_get_for_user(project=project, study_id=study_id)


def _image(item):
    try:
        fh = open(image_path(item.image), "rb")  # noqa: SIM115 - FileResponse closes it
    except (OSError, ValueError):
        raise Http404("Image file missing") from None
    ext = item.image.rsplit(".", 1)[-1]
    response = FileResponse(fh, content_type=CONTENT_TYPES.get(ext, "application/octet-stream"))
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Content-Disposition"] = "inline"
    response["Cache-Control"] = "private, max-age=3600"
    return response


# ---------------------------------------------------------------- lead


@login_required
@require_GET
def studies_home(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=MEMBERS)
    roles = project.user_roles
    studies = list(project.independence_studies.all())
    schema = project.get_schema()
    ctx = {
        "project": project,
        "is_lead": Role.LEAD in roles,
        "can_participate": bool(roles & set(selectors.PARTICIPANT_ROLES)),
        "can_judge": bool(roles & set(selectors.JUDGE_ROLES)),
        "can_adjudicate": bool(roles & set(selectors.ADJUDICATOR_ROLES)),
        "studies": studies,
        "open_studies": [s for s in studies if s.status == Study.Status.OPEN],
        "text_fields": [f["name"] for f in schema.fields if f["type"] == "text"],
        "fields": [f["name"] for f in schema.fields],
        "default_strata": selectors.default_strata(project),
        "default_reference": selectors.DEFAULT_REFERENCE,
    }
    return render(request, "studies/home.html", ctx)


@login_required
@require_POST
@service_errors
def study_new(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
    study = services.study_draw(
        project=project,
        lead=request.user,
        name=request.POST.get("name", ""),
        sample_size=request.POST.get("sample_size", "150"),
        seed=request.POST.get("seed", "0"),
        strata_fields=request.POST.getlist("strata_fields"),
        reference_field=request.POST.get("reference_field", selectors.DEFAULT_REFERENCE),
    )
    return redirect("study_page", slug=project.slug, study_id=study.pk)


@login_required
@require_GET
def study_page(request, slug, study_id):
    project, study = _study(request, slug, study_id, LEAD)
    items = list(selectors.study_items_for_lead(study=study))
    assignable = {}
    if study.status == Study.Status.OPEN:
        for si in items:
            if si.status == StudyItem.Status.REEXPLAINING and not si.removed_at and si.reexplanations.count() < 2:
                assignable[si.pk] = selectors.eligible_participants(study_item=si)
    current = selectors.current_references(study=study, study_items=items)
    rows = [
        {
            "si": si,
            "reex": list(si.reexplanations.all()),
            "assignable": assignable.get(si.pk),
            "current": current.get(si.pk, ""),
        }
        for si in items
    ]
    ctx = {
        "project": project,
        "study": study,
        "rows": rows,
        "report": selectors.study_report(study=study),
        "reasons": services.REMOVAL_REASONS,
    }
    return render(request, "studies/study.html", ctx)


def _back(request, slug, study_id, **_):
    return reverse("study_page", kwargs={"slug": slug, "study_id": study_id})


@login_required
@require_POST
@service_errors(back=_back)
def study_action(request, slug, study_id, action):
    project, study = _study(request, slug, study_id, LEAD)
    if action == "confirm":
        services.study_confirm(study=study, lead=request.user)
        messages.success(request, "The sample is confirmed: participants can start re-explaining.")
    elif action == "discard":
        services.study_discard(study=study, lead=request.user)
        messages.success(request, "The draft sample was discarded.")
        return redirect("studies_home", slug=project.slug)
    elif action == "close":
        services.study_close(study=study, lead=request.user)
        messages.success(request, "The study is closed.")
    else:
        raise Http404("No such action")
    return redirect("study_page", slug=project.slug, study_id=study.pk)


@login_required
@require_POST
@service_errors(back=_back)
def study_item_action(request, slug, study_id, study_item_id, action):
    project, study = _study(request, slug, study_id, LEAD)
    si = selectors.study_item_get(study=study, study_item_id=study_item_id)
    if action == "assign":
        try:
            user = get_user_model().objects.get(pk=int(request.POST.get("participant", "")))
        except (ValueError, get_user_model().DoesNotExist):
            raise Http404("No such member") from None
        services.reexplanation_assign(study_item=si, participant=user, lead=request.user)
        messages.success(request, f"{user.username} re-explains item {si.item_id}.")
    elif action == "revise":
        services.study_reference_revise(
            study_item=si,
            lead=request.user,
            text=request.POST.get("text", ""),
            note=request.POST.get("note", ""),
            expected=request.POST.get("expected"),
        )
        messages.success(request, f"The reference of item {si.item_id} is revised (the old text is in its history).")
    elif action == "remove":
        services.study_item_remove(
            study_item=si, lead=request.user, reason=request.POST.get("reason", ""), note=request.POST.get("note", "")
        )
        messages.success(request, f"Item {si.item_id} is removed from the dataset.")
    else:
        raise Http404("No such action")
    return redirect(f"{_back(request, slug, study_id)}#si-{si.pk}")


@login_required
@require_GET
def study_item_image(request, slug, study_id, study_item_id):
    """The image for the lead, a judge of the item, or an adjudicator who may decide it."""
    project, study = _study(request, slug, study_id, [Role.LEAD, Role.REVIEWER, Role.ANNOTATOR])
    si = selectors.study_item_get(study=study, study_item_id=study_item_id)
    user = request.user
    allowed = (
        Role.LEAD in project.user_roles
        or Reexplanation.objects.filter(study_item=si, judge=user).exists()
        or (si.status == StudyItem.Status.ADJUDICATION and si in selectors.adjudication_open(study=study, user=user))
    )
    if not allowed:
        raise PermissionDenied("This item's image is not among the study work given to you.")
    return _image(si.item)


# ---------------------------------------------------------------- participants


@login_required
@require_POST
@service_errors
def reexplain_next(request, slug, study_id):
    project, study = _study(request, slug, study_id, selectors.PARTICIPANT_ROLES)
    r = services.reexplanation_claim_next(study=study, participant=request.user)
    if r is None:
        messages.info(request, "No meme is waiting for you to re-explain in this study. Thank you!")
        return redirect("studies_home", slug=project.slug)
    return redirect("study_reexplain", slug=project.slug, study_id=study.pk, reexplanation_id=r.pk)


@login_required
@require_http_methods(["GET", "POST"])
@service_errors
def reexplain_page(request, slug, study_id, reexplanation_id):
    project, study = _study(request, slug, study_id, selectors.PARTICIPANT_ROLES)
    r = selectors.reexplanation_get_for_participant(user=request.user, study=study, reexplanation_id=reexplanation_id)
    if request.method == "POST":
        if request.POST.get("action") == "give_back":
            services.reexplanation_release(reexplanation=r, user=request.user)
            messages.info(request, "You gave the meme back.")
            return redirect("studies_home", slug=project.slug)
        submit = request.POST.get("action") == "submit"
        services.reexplanation_save(
            reexplanation=r,
            participant=request.user,
            text=request.POST.get("text", ""),
            version=request.POST.get("version"),
            submit=submit,
        )
        if submit:
            messages.success(request, "Thank you: your explanation is submitted.")
            nxt = services.reexplanation_claim_next(study=study, participant=request.user)
            if nxt is not None:
                return redirect("study_reexplain", slug=project.slug, study_id=study.pk, reexplanation_id=nxt.pk)
            return redirect("studies_home", slug=project.slug)
        messages.success(request, "Draft saved.")
        return redirect("study_reexplain", slug=project.slug, study_id=study.pk, reexplanation_id=r.pk)
    ws = selectors.participant_workspace(reexplanation=r)
    return render(request, "studies/reexplain.html", {"project": project, "study_id": study.pk, "ws": ws})


@login_required
@require_GET
def reexplain_image(request, slug, study_id, reexplanation_id):
    _, study = _study(request, slug, study_id, selectors.PARTICIPANT_ROLES)
    r = selectors.reexplanation_get_for_participant(user=request.user, study=study, reexplanation_id=reexplanation_id)
    return _image(r.study_item.item)


# ---------------------------------------------------------------- judges and adjudicators


@login_required
@require_POST
@service_errors
def judge_next(request, slug, study_id):
    project, study = _study(request, slug, study_id, selectors.JUDGE_ROLES)
    r = services.judgement_claim_next(study=study, judge=request.user)
    if r is None:
        messages.info(request, "No re-explanation is waiting for your verdict in this study.")
        return redirect("studies_home", slug=project.slug)
    return redirect("study_judge", slug=project.slug, study_id=study.pk, reexplanation_id=r.pk)


@login_required
@require_http_methods(["GET", "POST"])
@service_errors
def judge_page(request, slug, study_id, reexplanation_id):
    project, study = _study(request, slug, study_id, selectors.JUDGE_ROLES)
    r = selectors.reexplanation_get_for_judge(user=request.user, study=study, reexplanation_id=reexplanation_id)
    if request.method == "POST":
        services.judgement_submit(
            reexplanation=r,
            judge=request.user,
            verdict=request.POST.get("verdict", ""),
            note=request.POST.get("note", ""),
        )
        messages.success(request, "Verdict saved.")
        nxt = services.judgement_claim_next(study=study, judge=request.user)
        if nxt is not None:
            return redirect("study_judge", slug=project.slug, study_id=study.pk, reexplanation_id=nxt.pk)
        return redirect("studies_home", slug=project.slug)
    ctx = {"project": project, "study": study, "r": r, "si": r.study_item, "verdicts": Verdict.choices}
    return render(request, "studies/judge.html", ctx)


@login_required
@require_GET
def adjudicate_next(request, slug, study_id):
    project, study = _study(request, slug, study_id, selectors.ADJUDICATOR_ROLES)
    waiting = selectors.adjudication_open(study=study, user=request.user)
    if not waiting:
        messages.info(request, "No conflict is waiting for you in this study.")
        return redirect("studies_home", slug=project.slug)
    return redirect("study_adjudicate", slug=project.slug, study_id=study.pk, study_item_id=waiting[0].pk)


@login_required
@require_http_methods(["GET", "POST"])
@service_errors
def adjudicate_page(request, slug, study_id, study_item_id):
    project, study = _study(request, slug, study_id, selectors.ADJUDICATOR_ROLES)
    si = selectors.study_item_get(study=study, study_item_id=study_item_id)
    if si not in selectors.adjudication_open(study=study, user=request.user):
        raise PermissionDenied("This item is not a conflict you may adjudicate (decided, or you are involved with it).")
    if request.method == "POST":
        services.study_item_adjudicate(
            study_item=si, user=request.user, verdict=request.POST.get("verdict", ""), note=request.POST.get("note", "")
        )
        messages.success(request, "The item's verdict is set.")
        return redirect("study_adjudicate_next", slug=project.slug, study_id=study.pk)
    ctx = {
        "project": project,
        "study": study,
        "si": si,
        "reex": list(si.reexplanations.order_by("slot")),
        "verdicts": Verdict.choices,
    }
    return render(request, "studies/adjudicate.html", ctx)
