"""Leaderboard pages (htmx, no inline script): per release and split, sortable by any column;
a submission's page (scores, CIs, breakdowns; worst items with gold and prediction for leads);
paired comparison of two submissions; the submit form; a lead's provider run.

Leads and researchers only: model identities are on every one of these pages (SPEC section 4),
so annotators, reviewers and auditors are refused (403) and non-members get 404.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from candidates.models import Provider
from core.errors import Invalid
from core.views import service_errors
from evaluation.calibration import calibration_create
from evaluation.judge_runs import judge_run_start
from evaluation.models import CalibrationSet, JudgeRun, ProviderRun
from evaluation.selectors import (
    LEADS,
    READERS,
    SUBMITTERS,
    judged_predictions_lines,
    leaderboard,
    release_get_for_evaluation,
    release_splits,
    split_check,
    submission_compare,
    submission_get,
    worst_items,
)
from evaluation.services import candidate_submissions_enter, provider_run_start, submission_create
from projects.access import project_get_for_user
from projects.models import Role


def _context(request, slug, number):
    project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
    release = release_get_for_evaluation(project=project, number=number)
    splits = release_splits(release)
    default = "test" if "test" in splits else splits[0]
    split = split_check(release, request.GET.get("split") or request.POST.get("split") or default)
    return project, release, split, splits


@login_required
@require_GET
def leaderboard_page(request, slug, number):
    project, release, split, splits = _context(request, slug, number)
    # The hidden candidate models are entered on first view (idempotent, unique per provider).
    candidate_submissions_enter(release=release, split=split)
    board = leaderboard(
        release=release, split=split, sort=request.GET.get("sort"), descending=request.GET.get("dir") != "asc"
    )
    is_lead = Role.LEAD in project.user_roles
    ctx = {
        "project": project,
        "release": release,
        "split": split,
        "splits": splits,
        "board": board,
        "is_lead": is_lead,
        "providers": Provider.objects.filter(project=project).order_by("name") if is_lead else [],
        "runs": ProviderRun.objects.filter(release=release).select_related("provider")[:10] if is_lead else [],
        "judge_runs": (
            JudgeRun.objects.filter(submission__release=release, submission__split=split).select_related(
                "submission", "submission__release", "judge_1", "judge_2", "project", "created_by"
            )[:10]
            if is_lead and board["judged"]
            else []
        ),
    }
    template = "evaluation/leaderboard.html#board" if request.htmx and request.GET.get("sort") else None
    return render(request, template or "evaluation/leaderboard.html", ctx)


def _back(request, slug, number, *args):
    split = request.POST.get("split")
    return f"/p/{slug}/releases/v{number}/leaderboard/" + (f"?split={split}" if split else "")


@login_required
@require_POST
@service_errors(back=_back)
def submission_create_view(request, slug, number):
    project = project_get_for_user(user=request.user, slug=slug, roles=SUBMITTERS)
    release = release_get_for_evaluation(project=project, number=number)
    upload = request.FILES.get("file")
    if upload is None:
        raise Invalid("Choose a predictions file.", errors={"file": "required"})
    submission = submission_create(
        user=request.user,
        release=release,
        split=request.POST.get("split") or None,
        model_name=request.POST.get("model_name", ""),
        description=request.POST.get("description", ""),
        url=request.POST.get("url", ""),
        file=upload,
        fmt=request.POST.get("format") or "jsonl",
    )
    messages.info(request, f"{submission.model_name} was scored.")
    return redirect("evaluation_submission", slug=project.slug, number=release.number, submission_id=submission.pk)


@login_required
@require_GET
def submission_page(request, slug, number, submission_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
    release = release_get_for_evaluation(project=project, number=number)
    submission = submission_get(release=release, submission_id=submission_id)
    is_lead = Role.LEAD in project.user_roles
    scores = submission.scores or {}
    board = leaderboard(release=release, split=submission.split)
    return render(
        request,
        "evaluation/submission.html",
        {
            "project": project,
            "release": release,
            "submission": submission,
            "figures": scores.get("figures") or {},
            "breakdowns": scores.get("breakdowns") or {},
            "report": submission.report or {},
            "is_lead": is_lead,
            # Gold next to predictions: leads only (selectors never load it for others).
            "worst": worst_items(submission) if is_lead else None,
            "others": [r for r in board["rows"] if r["id"] != submission.pk],
            "judged": board["judged"],
            "main_figures": {k: v for k, v in (scores.get("figures") or {}).items() if not k.startswith("judge")},
            "judges": scores.get("judges") or [],
            "judging": (submission.report or {}).get("judging") or {},
            "calibrations": CalibrationSet.objects.filter(submission=submission).select_related("created_by")[:20]
            if board["judged"]
            else [],
        },
    )


@login_required
@require_GET
def compare_page(request, slug, number):
    project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
    release = release_get_for_evaluation(project=project, number=number)
    a = submission_get(release=release, submission_id=request.GET.get("a"))
    b = submission_get(release=release, submission_id=request.GET.get("b"))
    ctx = {"project": project, "release": release, "a": a, "b": b, "rows": submission_compare(a, b)}
    template = "evaluation/compare.html#comparison" if request.htmx else "evaluation/compare.html"
    return render(request, template, ctx)


@login_required
@require_POST
@service_errors(back=_back)
def provider_run_view(request, slug, number):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEADS)
    release = release_get_for_evaluation(project=project, number=number)
    run = provider_run_start(
        user=request.user,
        release=release,
        split=request.POST.get("split") or None,
        provider_id=request.POST.get("provider"),
    )
    messages.info(request, f"{run.provider.name} is running on {run.split} (job #{run.pk}).")
    return redirect(f"/p/{project.slug}/releases/v{release.number}/leaderboard/?split={run.split}")


def _submission_back(request, slug, number, submission_id):
    return f"/p/{slug}/releases/v{number}/submissions/{submission_id}/"


@login_required
@require_POST
@service_errors(back=_back)
def judge_run_view(request, slug, number):
    """A lead has two judge providers score a submission (VIKR)."""
    project = project_get_for_user(user=request.user, slug=slug, roles=LEADS)
    release = release_get_for_evaluation(project=project, number=number)
    chosen = request.POST.get("submission", "")
    if not chosen.isdigit():
        messages.error(request, "Choose the submission the judges score.")
        return redirect(f"/p/{project.slug}/releases/v{release.number}/leaderboard/")
    submission = submission_get(release=release, submission_id=int(chosen))
    run = judge_run_start(
        user=request.user,
        submission=submission,
        judge_1_id=request.POST.get("judge_1"),
        judge_2_id=request.POST.get("judge_2"),
    )
    messages.info(
        request, f"{run.judge_1.name} and {run.judge_2.name} are judging {submission.model_name} (job #{run.pk})."
    )
    return redirect(f"/p/{project.slug}/releases/v{release.number}/leaderboard/?split={submission.split}")


@login_required
@require_GET
def judged_predictions_view(request, slug, number, submission_id):
    """The submission's predictions as scored (with the judges' decisions for a VIKR release):
    ``python evaluate.py`` on this file reproduces its figures."""
    project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
    release = release_get_for_evaluation(project=project, number=number)
    submission = submission_get(release=release, submission_id=submission_id)
    body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in judged_predictions_lines(submission))
    response = HttpResponse(body.encode(), content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="{project.slug}-v{release.number}-{submission.split}-submission{submission.pk}.jsonl"'
    )
    return response


@login_required
@require_POST
@service_errors(back=_submission_back)
def calibration_upload_view(request, slug, number, submission_id):
    project = project_get_for_user(user=request.user, slug=slug, roles=LEADS)
    release = release_get_for_evaluation(project=project, number=number)
    submission = submission_get(release=release, submission_id=submission_id)
    upload = request.FILES.get("file")
    if upload is None:
        raise Invalid("Choose a labels file (CSV or JSONL).", errors={"file": "required"})
    if upload.size > 5 << 20:
        raise Invalid("The file was refused: it is larger than 5 MB.", errors={"file": "too large"})
    cal = calibration_create(
        user=request.user, submission=submission, data=upload.read(), name=request.POST.get("name", "")
    )
    messages.info(request, f"Calibration set #{cal.pk}: {cal.report['n_items']} human-labelled items.")
    return redirect(_submission_back(request, slug, number, submission_id) + "#calibration")
