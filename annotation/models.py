"""Independent annotation (SPEC section 1 step 2, Meme3W Appendix A.2).

An ``Annotation`` is one person's record for one item: a regular annotation (N distinct
annotators per item) or a candidate-blind audit. An ``Assignment`` is the right to work on an
item: it holds one of the item's N slots while it is live.

Slot rule (enforced by annotation.services under a row lock on the item):

- a slot is held by an assignment that is ``submitted``, or ``active`` with ``expires_at`` in the
  future (every draft save renews it);
- an expired assignment holds nothing: the item goes back to the pool, but the annotator's
  ``Annotation`` (their draft) is kept. If they come back while a slot is free they take it again
  and continue. If someone else took the slot, the draft stays readable and keeps autosaving,
  but cannot be submitted until a slot frees up again (the submit answers 409 "slot taken").
- a skipped item's assignment is deleted (the slot frees at once); the ``Annotation`` row with
  status ``skipped`` keeps the skipper from ever being given the item again.

When the N-th annotation is submitted the item is routed (adjudication.services.item_route) in
the same transaction and the item's assignments are deleted: they matter only while the item is
being annotated, which keeps the "next item" queries bounded by work in flight, not by project
size.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from projects.models import Item, Project


class Kind(models.TextChoices):
    ANNOTATION = "annotation", "Annotation"
    # Candidate-blind audit (Meme3W Appendix A.2 "Candidate-blind audit"): no candidates shown.
    AUDIT = "audit", "Blind audit"


class Annotation(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        SUBMITTED = "submitted", "Submitted"
        SKIPPED = "skipped", "Skipped"

    Kind = Kind

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="annotations")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="annotations")
    kind = models.CharField(
        max_length=12,
        choices=Kind.choices,
        default=Kind.ANNOTATION,
        help_text="annotation (counts toward the item's N) or audit (candidate-blind).",
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.DRAFT)
    values = models.JSONField(
        default=dict,
        blank=True,
        help_text=("Schema fields. Validated when submitted; while a draft, the annotator's work in progress."),
    )
    draft_values = models.JSONField(
        null=True,
        blank=True,
        help_text=(
            "Unsubmitted edits of a submitted annotation (a revision in progress); null when none. "
            "``values`` keeps the last submitted, validated record meanwhile."
        ),
    )
    version = models.PositiveIntegerField(
        default=0, help_text="Incremented on each save; a stale version gets HTTP 409."
    )
    schema_version = models.PositiveIntegerField(default=1, help_text="Project schema version of the last save.")
    guideline_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="Project guideline version of the last save (null: before versioning)."
    )
    provenance = models.JSONField(
        default=dict,
        blank=True,
        help_text=(
            '{field: {"letter": "B", "candidate_id": 12, "edited": false}} for fields taken from a candidate; '
            "edited = the saved value differs from the candidate's (computed by the server)."
        ),
    )
    time_spent_ms = models.PositiveBigIntegerField(
        default=0, help_text="Active time measured in the browser, summed over saves."
    )
    opened_at = models.DateTimeField(
        null=True, blank=True, help_text="First time the annotator opened the item (server time)."
    )
    submitted_at = models.DateTimeField(null=True, blank=True, help_text="Last submission (server time).")
    first_submitted_at = models.DateTimeField(null=True, blank=True, help_text="First submission (server time).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    skip_reason = models.TextField(blank=True, help_text="Why the annotator skipped the item (welfare, unclear, ...).")
    stage = models.PositiveSmallIntegerField(
        default=0, help_text="Index of the workflow stage (projects.workflow) the annotation belongs to."
    )

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["item", "annotator", "kind", "stage"], name="uniq_annotation_item_annotator_kind_stage"
            ),
        ]
        indexes = [
            models.Index(fields=["item", "kind", "status"]),
            models.Index(fields=["annotator", "kind", "status"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind} of item {self.item_id} by {self.annotator_id} ({self.status})"

    @property
    def working_values(self) -> dict:
        """What the annotator is editing: a pending revision if any, else the saved values."""
        return self.draft_values if self.draft_values is not None else self.values


class Assignment(models.Model):
    """The right to work on an item; holds one of its N slots while live (see module doc)."""

    class Status(models.TextChoices):
        ACTIVE = "active", "Active (claimed)"
        SUBMITTED = "submitted", "Submitted"

    project = models.ForeignKey(
        Project,
        on_delete=models.CASCADE,
        related_name="assignments",
        help_text="Denormalized from item: the queue is per project.",
    )
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments")
    annotation = models.OneToOneField(Annotation, on_delete=models.CASCADE, related_name="assignment")
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.ANNOTATION)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.ACTIVE)
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Null: never expires (audit assignments).")
    stage = models.PositiveSmallIntegerField(default=0, help_text="Workflow stage of the slot.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["item", "annotator", "kind", "stage"], name="uniq_assignment_item_annotator_kind_stage"
            ),
        ]
        indexes = [models.Index(fields=["project", "kind", "item"])]

    def __str__(self) -> str:
        return f"{self.kind} assignment of item {self.item_id} to {self.annotator_id} ({self.status})"


def slot_held(assignment_status: str | None, expires_at, now) -> bool:
    """The slot rule of the module docstring, for one assignment (or None)."""
    if assignment_status == Assignment.Status.SUBMITTED:
        return True
    if assignment_status == Assignment.Status.ACTIVE:
        return expires_at is None or expires_at > now
    return False


def assignment_of(annotation: Annotation) -> Assignment | None:
    """The annotation's assignment, or None (reverse one-to-one raises when absent)."""
    try:
        return annotation.assignment
    except Assignment.DoesNotExist:
        return None


class AnnotationRevision(models.Model):
    """One row per save of an annotation: the edit history."""

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="revisions")
    version = models.PositiveIntegerField()
    status = models.CharField(max_length=12, choices=Annotation.Status.choices, help_text="Status after this save.")
    values = models.JSONField()
    provenance = models.JSONField(default=dict)
    saved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    saved_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["annotation_id", "version"]
        constraints = [models.UniqueConstraint(fields=["annotation", "version"], name="uniq_annotation_revision")]


class AnnotatorPreference(models.Model):
    """Welfare settings of one annotator in one project (Meme3W Appendix D)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="annotator_preferences")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="annotator_preferences")
    content_warning_accepted_at = models.DateTimeField(
        null=True, blank=True, help_text="When the annotator read the content warning."
    )
    blur_images = models.BooleanField(default=False, help_text="Blur each image until clicked.")
    auto_advance = models.BooleanField(default=True, help_text="Open the next item right after a submit.")
    guideline_seen_version = models.PositiveIntegerField(
        default=0, help_text="Last guideline version the annotator marked as read (0: none)."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "project"], name="uniq_annotator_preference")]
