"""Model evaluation against a release's gold (SPEC section 6).

- ``Submission``: one model's predictions for one published release and split, immutable once
  written (only ``evaluation.services`` creates rows; nothing updates them). The predictions
  are stored compressed, as read from the file (field values verbatim, so the scorer can be
  rerun: ``metrics.evaluation`` is deterministic); ``scores`` caches the figures with n and
  CIs, ``report`` what the file held line by line.
- ``ProviderRun``: a lead's request to run a configured candidate provider on a release split
  (core.jobs); it ends by writing a Submission.
- ``JudgeRun`` / ``JudgeVerdict`` (MemeBench VIKR, a ``checklist_judges`` plan): two judge
  providers decide pass/fail on every checklist item of every response; one verdict row per
  (submission, judge, item, request digest), so a resumed or repeated run never pays twice.
  A judged plan's submission is the one exception to immutability: it is written without
  figures, and each judge run that finishes rewrites its predictions (now carrying the
  judges' decisions, the file ``evaluate.py`` scores offline), report and scores in the same
  transaction that ends the run. Nothing else updates it.
- ``CalibrationSet``: human pass/fail labels of two raters on a subset of a judged submission.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from candidates.models import Provider
from core.models import Job
from exports.models import Release
from projects.models import Project


class Source(models.TextChoices):
    UPLOAD = "upload", "Predictions file"
    REPLIES = "replies", "Raw model replies"
    CANDIDATES = "candidates", "Hidden candidate model"
    PROVIDER = "provider", "Provider run"


class Submission(models.Model):
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="submissions", help_text="Denormalized from the release."
    )
    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="submissions")
    split = models.CharField(max_length=12, help_text="Split of the release the predictions are for.")
    model_name = models.CharField(max_length=120, help_text="Name of the model on the leaderboard.")
    description = models.TextField(blank=True, max_length=2000, help_text="What the model is, how it was run.")
    url = models.URLField(blank=True, max_length=500, help_text="Paper, code or model card.")
    source = models.CharField(max_length=12, choices=Source.choices, help_text="Where the predictions came from.")
    provider = models.ForeignKey(
        Provider,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="submissions",
        help_text="The candidate provider behind a hidden-model or provider-run entry.",
    )
    predictions = models.BinaryField(help_text="zlib-compressed JSON {item_id: {field: value}} of the scored lines.")
    predictions_sha256 = models.CharField(max_length=64, help_text="sha256 of the uncompressed predictions JSON.")
    report = models.JSONField(default=dict, help_text="Counts (missing, extra, duplicate, malformed) and problems.")
    scores = models.JSONField(default=dict, help_text="Figures {name: {label, value, n, ci}} and breakdowns.")
    scorer = models.CharField(max_length=40, help_text="metrics.evaluation plan format and version used.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["release_id", "split", "-created_at", "-id"]
        indexes = [models.Index(fields=["release", "split"])]
        constraints = [
            # A hidden candidate model is entered once per release split (redelivered or
            # concurrent page loads cannot duplicate it).
            models.UniqueConstraint(
                fields=["release", "split", "provider"],
                condition=Q(source="candidates"),
                name="one_candidate_entry_per_provider_and_split",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_name} on {self.release} {self.split}"


class ProviderRun(Job):
    """A lead runs a candidate provider on a release split with the project's frozen prompt."""

    kind = "evaluation"
    task_name = "evaluation.run_provider"
    detail_template = "evaluation/_run_detail.html"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="provider_runs")
    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="provider_runs")
    split = models.CharField(max_length=12)
    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="evaluation_runs")
    replies = models.JSONField(default=dict, help_text="{item_id: raw reply} collected so far (resumable).")
    submission = models.OneToOneField(Submission, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "provider evaluation run"


class JudgeRun(Job):
    """A lead has two judge providers score one submission's explanations (VIKR)."""

    kind = "judging"
    task_name = "evaluation.run_judges"
    detail_template = "evaluation/_judge_run_detail.html"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="judge_runs")
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="judge_runs")
    judge_1 = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="+", help_text="Judge in slot 1.")
    judge_2 = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="+", help_text="Judge in slot 2.")
    prompt_version = models.CharField(max_length=40)
    counts = models.JSONField(
        default=dict, help_text="Requests asked, verdicts reused, retries, undecided item decisions (counted as fail)."
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "judge run"


class JudgeVerdict(models.Model):
    """One judge's decisions on one response to one item, as asked (the raw replies are kept)."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="verdicts")
    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="+")
    item_id = models.CharField(max_length=40, help_text="Release item id.")
    request_sha256 = models.CharField(max_length=64, help_text="Digest of the judge model, prompt, response and image.")
    decisions = models.JSONField(
        default=dict, help_text='{checklist item id: "pass" | "fail"} as read from the replies.'
    )
    undecided = models.JSONField(
        default=list, help_text="Checklist item ids with no readable decision after every attempt (scored as fail)."
    )
    replies = models.JSONField(default=list, help_text="The raw reply texts, one per attempt.")
    model_name = models.CharField(max_length=200, blank=True, help_text="Model name the endpoint reported.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["submission_id", "provider_id", "item_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["submission", "provider", "item_id", "request_sha256"], name="one_verdict_per_request"
            )
        ]


class CalibrationSet(models.Model):
    """Human pass/fail labels (two raters) on a subset of a judged submission's items."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="calibrations")
    name = models.CharField(max_length=120, blank=True)
    labels = models.JSONField(help_text='{item_id: {"1": {"layers": {V: 0|1, ...}}, "2": {...}}} per rater.')
    report = models.JSONField(default=dict, help_text="Kappas with CIs, counts, the human reference used.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
