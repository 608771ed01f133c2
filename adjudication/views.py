from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from adjudication import selectors, services
from adjudication.forms import LexiconForm, LexiconUploadForm, SendBackForm
from annotation.selectors import item_lang
from core.errors import Invalid
from core.views import json_body, service_errors
from projects.access import item_get_for_user, project_get_for_user
from projects.models import Role, Stage


@login_required
@require_GET
def review_home(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.REVIEWER])
    counts = selectors.review_queue_counts(project=project, user=request.user)
    return render(
        request,
        "adjudication/home.html",
        {
            "project": project,
            "counts": counts,
            "decisions": selectors.reviewer_decisions(project=project, user=request.user),
        },
    )


@login_required
@require_POST
@service_errors(back=lambda request, slug, record_id: reverse("review_home", args=[slug]))
def review_revise(request, slug, record_id):
    """Reopen one of the reviewer's own gold decisions (until it is in a published release)."""
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.REVIEWER])
    record = selectors.gold_get_for_reviewer(user=request.user, project=project, record_id=record_id)
    task = services.gold_revise(record=record, reviewer=request.user)
    messages.info(
        request, f"Item {record.item_id} is open again for your decision; the current gold stays until you save."
    )
    return redirect("review_task", slug=slug, task_id=task.pk)


@login_required
@require_POST
def review_next(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.REVIEWER])
    task = services.adjudication_next(project=project, reviewer=request.user)
    if task is None:
        messages.info(request, "Nothing to adjudicate for you right now.")
        return redirect("review_home", slug=slug)
    return redirect("review_task", slug=slug, task_id=task.pk)


@login_required
@require_GET
def review_task(request, slug, task_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.REVIEWER])
    task = selectors.task_get_for_reviewer(user=request.user, project=project, task_id=task_id)
    if task.status == task.Status.OPEN:
        services.adjudication_claim(task=task, reviewer=request.user)
    context = selectors.review_context(task=task)
    context.update(
        project=project,
        state_json=json.dumps(context["state"]),
        item_lang=item_lang(task.item),
        decide_url=reverse("review_decide", args=[slug, task.pk]),
        draft_url=reverse("review_draft", args=[slug, task.pk]),
        next_url=reverse("review_home", args=[slug]),
    )
    return render(request, "adjudication/review.html", context)


@login_required
@require_POST
@service_errors
def review_draft(request, slug, task_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.REVIEWER])
    task = selectors.task_get_for_reviewer(user=request.user, project=project, task_id=task_id)
    data = json_body(request)
    if (
        not isinstance(data.get("draft"), dict)
        or isinstance(data.get("version"), bool)
        or not isinstance(data.get("version"), int)
    ):
        raise Invalid("Send JSON with 'draft' (object) and 'version' (integer).")
    version = services.adjudication_draft_save(
        task=task, reviewer=request.user, draft=data["draft"], version=data["version"]
    )
    return JsonResponse({"version": version})


@login_required
@require_POST
@service_errors
def review_decide(request, slug, task_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.REVIEWER])
    task = selectors.task_get_for_reviewer(user=request.user, project=project, task_id=task_id)
    data = json_body(request)
    if (
        not isinstance(data.get("decisions"), dict)
        or isinstance(data.get("version"), bool)
        or not isinstance(data.get("version"), int)
    ):
        raise Invalid("Send JSON with 'decisions' (object), 'note' and 'version' (integer).")
    note = data.get("note") if isinstance(data.get("note"), str) else ""
    gold = services.gold_decide(
        task=task, reviewer=request.user, decisions=data["decisions"], note=note, version=data["version"]
    )
    messages.success(request, f"Gold saved for item {task.item_id} (revision {gold.revision}).")
    return JsonResponse({"revision": gold.revision, "next": reverse("review_home", args=[slug])})


@login_required
def lexicon_page(request, slug):
    """Edit the lexicon as text or replace it from a CSV; errors show on the form that was used."""
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    version, entries = services.lexicon_current(project=project)
    initial = "\n".join(f"{v}, {c}" for v, c in sorted(entries.items(), key=lambda kv: kv[0].casefold()))
    form = LexiconForm(request.POST or None, initial={"entries": initial})
    upload = LexiconUploadForm()
    if request.method == "POST":
        text, used, field, note = None, form, "entries", ""
        if "file" in request.FILES:
            upload = used = LexiconUploadForm(request.POST, request.FILES)
            field, note = "file", "CSV import"
            if upload.is_valid():
                raw = upload.cleaned_data["file"].read(2_000_001)
                try:
                    text = raw.decode("utf-8-sig") if len(raw) <= 2_000_000 else None
                except UnicodeDecodeError:
                    text = None
                if text is None:
                    upload.add_error("file", "The file must be UTF-8 CSV text of at most 2 MB.")
        elif form.is_valid():
            text, note = form.cleaned_data["entries"], form.cleaned_data["note"]
        if text is not None:
            new, errors = services.lexicon_parse_csv(text)
            if not errors:
                try:
                    row = services.lexicon_save(project=project, entries=new, user=request.user, note=note)
                except Invalid as exc:  # shown entry by entry on the form that was used
                    errors = list(exc.errors.values()) or [exc.message]
                else:
                    messages.success(request, f"Lexicon saved as version {row.version} ({len(row.entries)} entries).")
                    return redirect("lexicon_page", slug=project.slug)
            for e in errors[:20]:
                used.add_error(field, e)
    return render(
        request,
        "adjudication/lexicon.html",
        {
            "project": project,
            "form": form,
            "upload": upload,
            "version": version,
            "count": len(entries),
            "versions": selectors.lexicon_versions(project=project)[:20],
        },
    )


@login_required
@require_GET
def lexicon_csv(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    version, entries = services.lexicon_current(project=project)
    response = HttpResponse(services.lexicon_to_csv(entries), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{project.slug}-lexicon-v{version or 0}.csv"'
    return response


@login_required
@require_GET
def items_page(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    stage = request.GET.get("stage") or None
    if stage not in (None, *Stage.values):
        messages.error(request, f"Unknown stage {stage!r}; showing all items.")
        stage = None
    return render(
        request,
        "adjudication/items.html",
        {
            "project": project,
            "items": selectors.items_for_lead(project=project, stage=stage),
            "stage": stage,
            "stages": Stage.choices,
        },
    )


@login_required
@require_GET
def item_history(request, slug, item_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    item = item_get_for_user(user=request.user, project=project, item_id=item_id)
    context = selectors.item_history(item=item)
    context.update(project=project, item=item, form=SendBackForm())
    return render(request, "adjudication/history.html", context)


@login_required
@require_POST
@service_errors
def item_send_back(request, slug, item_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    item = item_get_for_user(user=request.user, project=project, item_id=item_id)
    form = SendBackForm(request.POST)
    note = form.cleaned_data["note"] if form.is_valid() else ""
    services.gold_send_back(item=item, lead=request.user, note=note)
    messages.success(request, "Sent back to adjudication; the current gold stays until a reviewer decides.")
    return redirect("item_history", slug=slug, item_id=item.pk)
