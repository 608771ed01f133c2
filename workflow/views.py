"""Pages of steps that span annotation and adjudication (CONVENTIONS "Layers run one way")."""

from __future__ import annotations

import json
import re
from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.models import Annotation
from annotation.selectors import annotation_get_for_annotator, field_view
from candidates.models import Conversion, ConversionJob, Provider
from candidates.services.conversion import conversion_job_ensure, conversions_retry_failed
from core.errors import Invalid
from core.models import ACTIVE
from core.views import caught_service_error, json_body, service_errors
from projects.access import project_get_for_user
from projects.fieldtypes import REGISTRY
from projects.members import (
    INVITE_DAYS,
    MAX_CSV_BYTES,
    invitation_create,
    invitation_revoke,
    invitations_pending,
    member_add,
    member_deactivate,
    member_reactivate,
    member_roles_set,
    members_import_csv,
    members_of,
)
from projects.models import Item, Role, SchemaVersion, Stage
from projects.schema import DEFAULT_THRESHOLDS, Schema
from projects.schema_io import (
    MAX_FIELDS,
    MAX_SCHEMA_BYTES,
    form_move,
    form_rows,
    schema_check,
    schema_dump,
    schema_from_form,
    schema_parse,
    schema_problems,
)
from projects.services import AUTO_MERGE_RULES, skip_reasons_of, split_preview, threshold_keys
from workflow.services import conversion_provider_set, conversions_overview, item_flag
from workflow.setup import member_progress, schema_change, schema_change_impact, study_settings_update

_FIELD_KEY = re.compile(r"^field (\d+)")
SAMPLE_TEXT = "When the sample meme says something about somebody"
PREVIEW_IMPACT_LIMIT = 20_000


@login_required
@require_POST
@service_errors(back=lambda request, slug, item_id: reverse("annotate_item", args=[slug, item_id]))
def annotate_flag(request, slug, item_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.ANNOTATOR])
    annotation = annotation_get_for_annotator(user=request.user, project=project, item_id=item_id)
    item_flag(
        annotator=request.user,
        item=annotation.item,
        reason=request.POST.get("reason", ""),
        note=request.POST.get("note", ""),
    )
    messages.info(request, "Thank you: the item is flagged and leaves the dataset with your reason.")
    return redirect("annotate_home", slug=project.slug)


# ---------------------------------------------------------------- study setup (leads)
# The schema editor, the members page and the study settings explain their effect on work
# already done (workflow.setup), which needs annotation and adjudication: they live here.


def _problems_by_row(problems: dict[str, str]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for key, message in problems.items():
        m = _FIELD_KEY.match(key)
        if m:
            out.setdefault(int(m.group(1)) - 1, []).append(message)
    return out


def _editor_context(request, project, *, schema, problems=None, impact=None, notice=None):
    problems = problems or {}
    by_row = _problems_by_row(problems)
    rows = form_rows(schema)
    for i, row in enumerate(rows):
        row["problems"] = by_row.get(i, [])
        row["index"] = i
    return {
        "project": project,
        "rows": rows,
        "count": len(rows),
        "types": [
            (name, t.label, "choices" in t.spec_keys, "exclusive" in t.spec_keys, t.threshold_key)
            for name, t in REGISTRY.items()
        ],
        "problems": problems,
        "general_problems": [f"{k}: {v}" for k, v in problems.items() if not _FIELD_KEY.match(k)],
        "impact": impact,
        "notice": notice,
        "version": request.POST.get("version") or project.schema_version,
        "started": Annotation.objects.filter(item__project=project).exists(),
        "versions": SchemaVersion.objects.filter(project=project).order_by("-version")[:20],
    }


def _schema_from_request(request) -> tuple[dict, dict]:
    try:
        count = min(int(request.POST.get("count", "0")), MAX_FIELDS + 5)
    except ValueError:
        count = 0
    return schema_from_form(request.POST, count=max(count, 0))


@login_required
@require_http_methods(["GET", "POST"])
def schema_editor(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    if request.method == "GET":
        return render(request, "workflow/schema_editor.html", _editor_context(request, project, schema=project.schema))
    action = request.POST.get("action", "")
    if action in ("import_file", "import_text"):
        return _schema_import(request, project)
    schema, form_problems = _schema_from_request(request)
    if action == "save":
        problems = {**schema_problems(schema), **form_problems}
        if problems:
            messages.error(request, f"Not saved: the schema has {len(problems)} problem(s), listed below.")
            return render(
                request,
                "workflow/schema_editor.html",
                _editor_context(request, project, schema=schema, problems=problems),
                status=400,
            )
        impact = schema_change_impact(project=project, schema=schema)
        if impact.invalid_total and not request.POST.get("confirm"):
            return render(
                request,
                "workflow/schema_editor.html",
                _editor_context(request, project, schema=schema, impact=impact, notice="confirm"),
                status=409,
            )
        try:
            expected = int(request.POST.get("version", ""))
        except ValueError:
            expected = None
        with caught_service_error() as errors:
            project, impact = schema_change(project=project, schema=schema, expected_version=expected, confirm=True)
            messages.success(
                request,
                f"Schema version {project.schema_version} saved"
                + (
                    f"; {impact.invalid_total} existing record(s) keep their earlier version."
                    if impact.invalid_total
                    else "."
                ),
            )
            return redirect("schema_editor", slug=project.slug)
        messages.error(request, errors.message)
        return render(
            request,
            "workflow/schema_editor.html",
            _editor_context(request, project, schema=schema, problems=errors.errors),
            status=errors.status,
        )
    if action:
        schema = form_move(schema, action)
    return render(
        request, "workflow/schema_editor.html", _editor_context(request, project, schema=schema, problems=form_problems)
    )


def _schema_import(request, project):
    fmt = request.POST.get("format", "json")
    upload = request.FILES.get("file")
    with caught_service_error() as errors:
        if request.POST.get("action") == "import_file":
            if upload is None:
                raise Invalid("Choose a file to import.", errors={"file": "no file"})
            if upload.size > MAX_SCHEMA_BYTES:
                raise Invalid(f"The file is larger than {MAX_SCHEMA_BYTES:,} bytes.", errors={"file": "too large"})
            name = upload.name.lower()
            fmt = "yaml" if name.endswith((".yaml", ".yml")) else "json" if name.endswith(".json") else fmt
            data = schema_parse(upload.read(MAX_SCHEMA_BYTES + 1), fmt=fmt)
        else:
            data = schema_parse(request.POST.get("text", ""), fmt=fmt)
        problems = schema_problems(data)
        schema = data if isinstance(data, dict) and isinstance(data.get("fields"), list) else {"fields": []}
        schema = {"fields": [f for f in schema["fields"] if isinstance(f, dict)]}
        messages.info(
            request,
            "Imported into the editor: review and save."
            + (f" It has {len(problems)} problem(s), listed below." if problems else ""),
        )
        return render(
            request, "workflow/schema_editor.html", _editor_context(request, project, schema=schema, problems=problems)
        )
    messages.error(request, errors.message)
    return render(
        request, "workflow/schema_editor.html", _editor_context(request, project, schema=project.schema), status=400
    )


@login_required
@require_POST
def schema_preview(request, slug):
    """htmx: the annotation widgets of the schema in the form, for a sample item, and what saving
    it would do to saved work."""
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    schema, form_problems = _schema_from_request(request)
    problems = {**schema_problems(schema), **form_problems}
    context = {"project": project, "problems": problems}
    if not problems:
        parsed = Schema(schema_check(schema))
        context["fields"] = [field_view(parsed, spec, parsed.absent_values()[spec["name"]]) for spec in parsed.fields]
        context["has_boxes"] = any("region" in parsed.type_of(n).roles for n in parsed.names)
        # Checking every saved annotation on each change of the form is fine for a study's
        # thousands; past that the preview says so and the check runs when saving.
        submitted = Annotation.objects.filter(item__project=project, status=Annotation.Status.SUBMITTED).count()
        if submitted <= PREVIEW_IMPACT_LIMIT:
            context["impact"] = schema_change_impact(project=project, schema=schema)
        else:
            context["impact_deferred"] = submitted
        context["sample"] = Item.objects.filter(project=project).order_by("id").first()
        context["schema_json"] = json.dumps(schema_check(schema))
    return render(request, "workflow/_schema_preview.html", context)


@login_required
@require_POST
@service_errors
def schema_preview_check(request, slug):
    """The preview's "check these values": the values typed in the preview, validated by the schema
    in the form (JSON in, per-field messages out). Nothing is saved."""
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    body = json_body(request)
    schema = body.get("schema") if isinstance(body, dict) else None
    problems = schema_problems(schema)
    if problems:
        return JsonResponse({"ok": False, "errors": problems})
    sample = Item.objects.filter(project=project).order_by("id").first()
    parsed = Schema(schema_check(schema))
    values = body.get("values")
    if isinstance(values, dict):
        values = parsed.clear_hidden(
            {**parsed.absent_values(), **{k: v for k, v in values.items() if k in parsed.by_name}}
        )
    result = parsed.validate(values, item_text=sample.text if sample else SAMPLE_TEXT)
    return JsonResponse({"ok": result.ok, "errors": result.errors})


@login_required
@require_GET
def schema_export(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    fmt = "yaml" if request.GET.get("format") == "yaml" else "json"
    version = request.GET.get("version")
    schema = project.schema
    if version and version.isdigit():
        row = SchemaVersion.objects.filter(project=project, version=int(version)).first()
        if row is None:
            raise Http404("No such schema version")
        schema = row.schema
    response = HttpResponse(
        schema_dump(schema, fmt=fmt), content_type="application/yaml" if fmt == "yaml" else "application/json"
    )
    response["Content-Disposition"] = (
        f'attachment; filename="{project.slug}-schema-v{schema.get("version", 1)}.{"yaml" if fmt == "yaml" else "json"}"'
    )
    return response


# ---------------------------------------------------------------- members


def _members_context(project, *, invite_links=None, csv_result=None):
    people = members_of(project=project)
    progress = member_progress(project=project)
    for person in people:
        person["progress"] = progress.get(person["user"].pk)
    return {
        "project": project,
        "people": people,
        "invitations": invitations_pending(project=project),
        "roles": Role.choices,
        "invite_links": invite_links or [],
        "csv_result": csv_result,
    }


@login_required
@require_http_methods(["GET", "POST"])
@service_errors
def members_page(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    if request.method == "GET":
        return render(request, "workflow/members.html", _members_context(project))
    action = request.POST.get("action", "")
    roles = request.POST.getlist("roles")
    links, csv_result = [], None
    if action == "add":
        user, added = member_add(project=project, identifier=request.POST.get("identifier", ""), roles=roles)
        messages.success(request, f"{user.username} added as {', '.join(added)}.")
    elif action == "invite":
        try:
            days = int(request.POST.get("days", INVITE_DAYS))
        except ValueError:
            days = -1
        invitation, token = invitation_create(
            project=project, email=request.POST.get("email", ""), roles=roles, by=request.user, days=days
        )
        links.append(
            {"email": invitation.email, "url": request.build_absolute_uri(reverse("invitation", args=[token]))}
        )
        messages.success(
            request, f"Invitation for {invitation.email} made: copy the link below (it is shown only once)."
        )
    elif action == "csv":
        upload = request.FILES.get("file")
        if upload is None:
            raise Invalid("Choose a CSV file.", errors={"file": "no file"})
        csv_result = members_import_csv(project=project, data=upload.read(MAX_CSV_BYTES + 1), by=request.user)
        links = [
            {"email": row["email"], "url": request.build_absolute_uri(reverse("invitation", args=[row["token"]]))}
            for row in csv_result.invited
        ]
        messages.info(
            request,
            f"CSV: {len(csv_result.added)} added, {len(csv_result.invited)} invited, {len(csv_result.problems)} row(s) with problems (listed below).",
        )
    elif action in ("roles", "deactivate", "reactivate"):
        user = _member_user(project, request.POST.get("user"))
        if action == "roles":
            member_roles_set(project=project, user=user, roles=roles)
            messages.success(request, f"{user.username}: roles set to {', '.join(roles)}.")
        elif action == "deactivate":
            member_deactivate(project=project, user=user)
            messages.success(request, f"{user.username} deactivated: their past work stays, attributed and counted.")
        else:
            member_reactivate(project=project, user=user)
            messages.success(request, f"{user.username} reactivated.")
    elif action == "revoke":
        invitation_revoke(project=project, invitation_id=request.POST.get("invitation"))
        messages.success(request, "Invitation revoked: its link no longer works.")
    else:
        raise Invalid("Unknown action.")
    if links or csv_result:
        return render(
            request, "workflow/members.html", _members_context(project, invite_links=links, csv_result=csv_result)
        )
    return redirect("members_page", slug=project.slug)


def _member_user(project, user_id):
    """A person with a membership row in ``project`` (never any user by bare id)."""
    try:
        pk = int(user_id)
    except (TypeError, ValueError):
        raise Http404("No such member") from None
    user = get_user_model().objects.filter(pk=pk, memberships__project=project).distinct().first()
    if user is None:
        raise Http404("No such member")
    return user


# ---------------------------------------------------------------- study settings


SETTINGS_HELP = {
    "annotators_per_item": "Distinct annotators who each annotate every item independently (Meme3W: 2, AHA-Memes: 3). "
    "Lowering it below what items already have is explained before anything is saved.",
    "claim_timeout_minutes": "An item an annotator opened but did not submit goes back to the pool after this many "
    "minutes without a save (their draft is kept).",
    "session_item_cap": "Most items an annotator submits per session before being asked to take a break (welfare); 0: no cap.",
    "skip_reasons": "One per line, “key: label”. Annotators choose one when they skip; “other” asks for a note.",
    "thresholds": "Below these similarities two annotations of a field disagree and go to a reviewer; at or above, "
    "the difference is minor. A field's own threshold (schema editor) wins.",
    "auto_merge_rules": "Rules that settle differences without a reviewer. Every gold field records which rule made it.",
    "audit_sample_size": "Gold items re-annotated blind (no candidates) in a quality audit (Meme3W: 200).",
    "audit_strata": "Fields the audit sample is stratified over (empty: the schema's category and grounding fields).",
    "split_ratios": "Shares of train / validation / test (normalized to sum 1); the release's splitter allocates "
    "items by these ratios, stratified, from the seed.",
    "split_seed": "The same seed and items always give the same splits.",
    "phash_threshold": "Perceptual-hash Hamming distance under which two images are shown as possible near-duplicates.",
    "workflow": "The rounds of the study as JSON (README “Workflows of several rounds”): each stage's fields, "
    'annotators (a number or {"by": "split", "values": {...}, "default": n}), workers (usernames; empty: '
    "every annotator), exclude_workers_of, image (original or textfree), show_text, show_title, show_stages, "
    "gold (adjudicate, references or value), flags, candidates (true/false), prefill (none, or agreement: the form "
    "starts with every value most of the shown candidates agree on), instructions. Empty: one stage with every "
    "field, adjudicated.",
    "ocr_on_import": "Read every imported image with OCR: text and boxes stored, a text-free variant painted, "
    "a row without text takes the OCR text.",
}


def _settings_from_post(post) -> dict:
    data: dict[str, Any] = {}
    for key in (
        "annotators_per_item",
        "claim_timeout_minutes",
        "session_item_cap",
        "audit_sample_size",
        "split_seed",
        "phash_threshold",
    ):
        if key in post:
            data[key] = post.get(key, "").strip()
    if "skip_reasons" in post:
        reasons = []
        for line in post.get("skip_reasons", "").splitlines():
            if line.strip():
                key, _, label = line.partition(":")
                reasons.append([key.strip(), label.strip()])
        data["skip_reasons"] = reasons
    if "thresholds_present" in post:
        th = {}
        for key in DEFAULT_THRESHOLDS:
            raw = post.get(f"threshold_{key}", "").strip()
            if raw:
                try:
                    th[key] = float(raw)
                except ValueError:
                    th[key] = raw
        data["thresholds"] = th
        data["auto_merge_rules"] = post.getlist("auto_merge_rules")
        data["audit_strata"] = post.getlist("audit_strata")
    if "split_train" in post:
        data["split_ratios"] = [post.get(f"split_{s}", "").strip() or "0" for s in ("train", "val", "test")]
    if "workflow" in post:
        data["workflow"] = post.get("workflow", "")  # JSON text: settings_clean reads and checks it
    if "ocr_present" in post:
        data["ocr_on_import"] = bool(post.get("ocr_on_import"))
    return data


def _settings_context(project, *, data=None, errors=None, impact=None):
    values = {
        "annotators_per_item": project.annotators_per_item,
        "claim_timeout_minutes": project.claim_timeout_minutes,
        "session_item_cap": project.session_item_cap,
        "audit_sample_size": project.audit_sample_size,
        "split_seed": project.split_seed,
        "phash_threshold": project.phash_threshold,
        "skip_reasons": "\n".join(f"{k}: {v}" for k, v in skip_reasons_of(project)),
        "auto_merge_rules": project.auto_merge_rules or [],
        "audit_strata": project.audit_strata or [],
        "workflow": json.dumps(project.workflow or [], indent=2, ensure_ascii=False),
        "ocr_on_import": project.ocr_on_import,
    }
    ratios = list(project.split_ratios or [0.85, 0.05, 0.10])
    th = {**DEFAULT_THRESHOLDS, **(project.thresholds or {})}
    if data:
        for key in (
            "annotators_per_item",
            "claim_timeout_minutes",
            "session_item_cap",
            "audit_sample_size",
            "split_seed",
            "phash_threshold",
            "auto_merge_rules",
            "audit_strata",
        ):
            if key in data:
                values[key] = data[key]
        if "skip_reasons" in data:
            values["skip_reasons"] = "\n".join(f"{k}: {v}" for k, v in data["skip_reasons"])
        if "split_ratios" in data:
            ratios = data["split_ratios"]
        if "workflow" in data:  # shown back as typed
            wf = data["workflow"]
            values["workflow"] = wf if isinstance(wf, str) else json.dumps(wf, indent=2, ensure_ascii=False)
        if "ocr_on_import" in data:
            values["ocr_on_import"] = data["ocr_on_import"]
        if "thresholds" in data:
            th = {**th, **data["thresholds"]}
    applies = threshold_keys()
    return {
        "project": project,
        "values": values,
        "ratios": dict(zip(("train", "val", "test"), ratios)),
        "thresholds": [(k, th.get(k), DEFAULT_THRESHOLDS[k], applies.get(k, [])) for k in DEFAULT_THRESHOLDS],
        "rules": AUTO_MERGE_RULES,
        "fields": project.get_schema().fields,
        "help": SETTINGS_HELP,
        "errors": errors or {},
        "impact": impact,
        "preview": _split_preview(project, ratios),
        "has_workflow": bool(project.workflow),
    }


def _split_preview(project, ratios):
    try:
        values = [float(r) for r in ratios]
        if len(values) != 3 or min(values) < 0 or sum(values) <= 0:
            raise ValueError
    except (TypeError, ValueError):
        return None
    gold = Item.objects.filter(project=project, stage=Stage.GOLD).count()
    total = Item.objects.filter(project=project).exclude(stage=Stage.EXCLUDED).count()
    return {
        "gold": gold,
        "total": total,
        "gold_sizes": split_preview(ratios=values, n=gold),
        "total_sizes": split_preview(ratios=values, n=total),
    }


@login_required
@require_http_methods(["GET", "POST"])
def settings_page(request, slug):
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    if request.method == "GET":
        return render(request, "workflow/settings.html", _settings_context(project))
    data = _settings_from_post(request.POST)
    with caught_service_error() as errors:
        project, impact = study_settings_update(project=project, data=data, confirm=bool(request.POST.get("confirm")))
        messages.success(request, "Study settings saved." + (" " + " ".join(impact["explanation"]) if impact else ""))
        return redirect("settings_page", slug=project.slug)
    messages.error(request, errors.message)
    impact = getattr(errors.exc, "impact", None)
    return render(
        request,
        "workflow/settings.html",
        _settings_context(project, data=data, errors=errors.errors, impact=impact),
        status=errors.status,
    )


@login_required
@require_POST
def settings_split_preview(request, slug):
    """htmx: split sizes for the ratios being typed (nothing saved)."""
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    ratios = [request.POST.get(f"split_{s}", "").strip() or "0" for s in ("train", "val", "test")]
    return render(
        request,
        "workflow/_split_preview.html",
        {"preview": _split_preview(project, ratios), "ratios_bad": _split_preview(project, ratios) is None},
    )


# ---------------------------------------------------------------- model stages (leads)


@login_required
@require_http_methods(["GET", "POST"])
@service_errors
def conversions_page(request, slug):
    """A lead follows the model stages: counts per status, the items that failed with the
    reason and a retry, the flags of converted items, and the provider that converts."""
    project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
    workflow = project.get_workflow()
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "retry":
            ids = [int(i) for i in request.POST.getlist("conversion") if i.isdigit()] or None
            n = conversions_retry_failed(project=project, user=request.user, conversion_ids=ids)
            messages.info(request, f"{n} conversion{'s' if n != 1 else ''} queued again.")
        elif action == "provider":
            conversion_provider_set(
                project=project,
                user=request.user,
                stage_name=request.POST.get("stage", ""),
                provider=request.POST.get("provider", ""),
            )
            messages.info(request, "The converting provider is saved; it is used from the next conversion on.")
        elif action == "run":
            waiting = Conversion.objects.filter(item__project=project, status__in=ACTIVE).count()
            if waiting:
                conversion_job_ensure(project=project, user=request.user)
                messages.info(request, f"{waiting} waiting conversion{'s are' if waiting != 1 else ' is'} running.")
            else:
                messages.info(request, "No conversion is waiting: failed ones need a retry.")
        return redirect("conversions_page", slug=project.slug)
    return render(
        request,
        "workflow/conversions.html",
        {
            "project": project,
            "stages": conversions_overview(project=project, workflow=workflow),
            "providers": list(Provider.objects.filter(project=project).order_by("name")),
            "job": ConversionJob.objects.filter(project=project).order_by("-created_at", "-id").first(),
        },
    )
