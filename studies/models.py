"""Reference-independence study (MemeBench Appendix A.2; issue 15 deliverable 2).

A lead draws a sample of items stratified by metadata fields (language x domain), each carrying a
reference text written in an earlier workflow stage. Two participants who never saw the
reference re-explain each sampled meme blind (image only); a third person judges each
re-explanation against the reference (fully / partially / not compatible); when the two
verdicts of an item differ the item goes to adjudication, otherwise the agreed verdict stands.
The report gives the share of items fully or partially compatible with a Wilson 95% interval,
the conflicts, and the revisions and removals the study led to.

State of a ``StudyItem`` (denormalized, changed only by studies.services in the transaction
that causes it): reexplaining -> judging (both re-explanations submitted) -> done (verdicts
agree) | adjudication (they differ) -> done (adjudicated).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from projects.models import Item, Project

#: Re-explainers per item (MemeBench: "two participants").
SLOTS = (1, 2)


class Verdict(models.TextChoices):
    FULLY = "fully", "Fully compatible"
    PARTIALLY = "partially", "Partially compatible"
    NOT = "not", "Not compatible"


class Study(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Drawn, not confirmed"
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="independence_studies")
    name = models.CharField(max_length=200, help_text="Shown on the study pages and in the release.")
    reference_field = models.CharField(
        max_length=40, default="explanation", help_text="Schema field holding the reference text (a text field)."
    )
    strata_fields = models.JSONField(
        default=list, help_text="Schema fields the sample is stratified over (default language x domain)."
    )
    sample_size = models.PositiveIntegerField(default=150, help_text="Items asked for (MemeBench: 150).")
    seed = models.IntegerField(default=0, help_text="Seed of the draw: the same seed and items give the same sample.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    eligible = models.PositiveIntegerField(default=0, help_text="Items that could be sampled when it was drawn.")
    strata = models.JSONField(
        default=list, help_text="[{key, label, population, sampled}] per stratum, as drawn (the strata table)."
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "studies"

    def __str__(self) -> str:
        return f"{self.name} ({self.project})"


class StudyItem(models.Model):
    class Status(models.TextChoices):
        REEXPLAINING = "reexplaining", "Being re-explained"
        JUDGING = "judging", "Being judged"
        ADJUDICATION = "adjudication", "In adjudication"
        DONE = "done", "Decided"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="study_entries")
    stratum = models.CharField(max_length=300, help_text="Stratum key, e.g. language=English|domain=ACG.")
    stratum_label = models.CharField(max_length=500)
    reference_annotation = models.ForeignKey(
        "annotation.Annotation",
        null=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The submitted annotation whose value is the reference.",
    )
    reference_text = models.TextField(help_text="The reference as drawn: what the judges compare against.")
    blocked = models.JSONField(
        default=list,
        help_text="User ids who wrote or saw the reference when it was drawn: never re-explainers, judges "
        "or adjudicators of the item.",
    )
    status = models.CharField(max_length=14, choices=Status.choices, default=Status.REEXPLAINING, db_index=True)
    verdict = models.CharField(max_length=10, choices=Verdict.choices, blank=True, help_text="The item's verdict.")
    verdict_source = models.CharField(max_length=12, blank=True, help_text="agreed | adjudicated")
    adjudicated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    adjudicated_at = models.DateTimeField(null=True, blank=True)
    adjudication_note = models.TextField(blank=True)
    revisions = models.PositiveIntegerField(default=0, help_text="Times the lead revised the reference from the study.")
    removed_reason = models.CharField(max_length=300, blank=True, help_text="Why the lead removed the item, if so.")
    removed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study_id", "id"]
        constraints = [models.UniqueConstraint(fields=["study", "item"], name="uniq_study_item")]

    def __str__(self) -> str:
        return f"{self.item} in {self.study}"


class Reexplanation(models.Model):
    """One participant's blind re-explanation of a sampled meme, and a judge's verdict on it."""

    class Status(models.TextChoices):
        ASSIGNED = "assigned", "Assigned"
        SUBMITTED = "submitted", "Submitted"

    study_item = models.ForeignKey(StudyItem, on_delete=models.CASCADE, related_name="reexplanations")
    slot = models.PositiveSmallIntegerField(help_text="1 or 2.")
    participant = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The lead who assigned it; null: claimed from the queue.",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ASSIGNED)
    text = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=0, help_text="Incremented on each save; a stale version gets 409.")
    assigned_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    judge = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    judge_claimed_at = models.DateTimeField(null=True, blank=True)
    verdict = models.CharField(max_length=10, choices=Verdict.choices, blank=True)
    verdict_note = models.TextField(blank=True)
    judged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study_item_id", "slot"]
        constraints = [
            models.UniqueConstraint(fields=["study_item", "slot"], name="uniq_reexplanation_slot"),
            models.UniqueConstraint(fields=["study_item", "participant"], name="uniq_reexplanation_participant"),
            models.CheckConstraint(condition=Q(slot__in=SLOTS), name="reexplanation_slot_1_or_2"),
        ]

    def __str__(self) -> str:
        return f"re-explanation {self.slot} of {self.study_item}"
