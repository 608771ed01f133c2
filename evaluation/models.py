"""Model evaluation against a release's gold (SPEC section 6).

- ``Submission``: one model's predictions for one published release and split, immutable once
  written (only ``evaluation.services`` creates rows; nothing updates them). The predictions
  are stored compressed, as read from the file (field values verbatim, so the scorer can be
  rerun: ``metrics.evaluation`` is deterministic); ``scores`` caches the figures with n and
  CIs, ``report`` what the file held line by line.
- ``ProviderRun``: a lead's request to run a configured candidate provider on a release split
  (core.jobs); it ends by writing a Submission.
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
