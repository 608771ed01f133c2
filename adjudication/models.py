from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from projects.models import Item, Project


class AdjudicationTask(models.Model):
    """An item whose annotations disagree, waiting for (or decided by) a third person."""

    class Status(models.TextChoices):
        OPEN = "open"
        CLAIMED = "claimed"
        DONE = "done"
        CANCELLED = "cancelled"

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="adjudication_tasks")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN, db_index=True)
    comparison = models.JSONField(help_text="{field: agree | minor | disagree} over all annotator pairs (worst).")
    annotation_ids = models.JSONField(help_text="Submitted annotations compared, in 'Annotator 1/2/...' order.")
    reason = models.CharField(max_length=20, default="disagreement", help_text="disagreement | sent_back")
    settled = models.JSONField(
        default=dict,
        blank=True,
        help_text="{field: {value, provenance}} settled before review (majority vote); kept unless the reviewer overrides.",
    )
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    claimed_at = models.DateTimeField(null=True, blank=True)
    draft = models.JSONField(default=dict, blank=True, help_text="Reviewer's unsaved decisions (autosave).")
    version = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["item"], condition=Q(status__in=["open", "claimed"]), name="one_active_adjudication_per_item"
            )
        ]


class GoldRecord(models.Model):
    """One revision of an item's gold record; a correction is a new revision, old ones kept."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="gold_records")
    revision = models.PositiveIntegerField()
    is_current = models.BooleanField(default=True)
    values = models.JSONField(help_text="The gold value of every schema field.")
    provenance = models.JSONField(
        help_text="{field: {source: identical | reviewer | auto-merge, rule?, from_annotator?, decided_by?}}"
    )
    note = models.TextField(blank=True)
    schema_version = models.PositiveIntegerField()
    lexicon_version = models.PositiveIntegerField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    task = models.ForeignKey(AdjudicationTask, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item_id", "revision"]
        constraints = [
            models.UniqueConstraint(fields=["item", "revision"], name="uniq_gold_revision"),
            models.UniqueConstraint(fields=["item"], condition=Q(is_current=True), name="one_current_gold"),
        ]


class LexiconVersion(models.Model):
    """The project's entity lexicon (variant -> canonical), one row per version."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="lexicon_versions")
    version = models.PositiveIntegerField()
    entries = models.JSONField(help_text="{variant: canonical}, both as typed by the lead.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    change_note = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["project_id", "version"]
        constraints = [models.UniqueConstraint(fields=["project", "version"], name="uniq_lexicon_version")]


class HistoryEvent(models.Model):
    """Who changed what, when, from what to what: annotations, gold, lexicon, routing."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="history")
    item = models.ForeignKey(Item, null=True, blank=True, on_delete=models.CASCADE, related_name="history")
    kind = models.CharField(max_length=40)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    old = models.JSONField(null=True, blank=True)
    new = models.JSONField(null=True, blank=True)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]
