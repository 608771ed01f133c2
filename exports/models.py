"""Split integrity and releases (SPEC section 1 steps 5-6, section 5).

- ``NearDuplicatePair``: a perceptual-hash candidate pair (lib.phash) waiting for, or
  settled by, a person. Unreviewed pairs count as "same" when splitting (a leak between train
  and test is worse than a slightly uneven split).
- ``DedupScan``: one run of the pair search over a project, so the review page can say when
  the project was last scanned and whether items arrived since.
- ``ExportJob``: a lead's request to build a release; carries the progress the page polls.
- ``Release``: a published, immutable release vN. The row exists only once its files are in
  place (exports.services.export_job_run publishes atomically).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.models import Job
from projects.models import Item, Project


class PairStatus(models.TextChoices):
    UNREVIEWED = "unreviewed", "Unreviewed"
    SAME = "same", "Same meme"
    DIFFERENT = "different", "Different"


class NearDuplicatePair(models.Model):
    project = models.ForeignKey(
        Project,
        on_delete=models.CASCADE,
        related_name="near_duplicate_pairs",
        help_text="Denormalized from the items: the queue is per project.",
    )
    item_a = models.ForeignKey(
        Item, on_delete=models.CASCADE, related_name="+", help_text="The item with the smaller id."
    )
    item_b = models.ForeignKey(
        Item, on_delete=models.CASCADE, related_name="+", help_text="The item with the larger id."
    )
    distance = models.PositiveSmallIntegerField(help_text="Hamming distance of the two 64-bit pHashes.")
    status = models.CharField(max_length=12, choices=PairStatus.choices, default=PairStatus.UNREVIEWED)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item_a_id", "item_b_id"]
        constraints = [
            models.UniqueConstraint(fields=["item_a", "item_b"], name="uniq_near_duplicate_pair"),
            models.CheckConstraint(condition=Q(item_a__lt=models.F("item_b")), name="near_duplicate_pair_ordered"),
        ]
        indexes = [models.Index(fields=["project", "status", "distance"])]

    def __str__(self) -> str:
        return f"pair {self.item_a_id}-{self.item_b_id} d={self.distance} ({self.status})"


class DedupScan(Job):
    """One run of the near-duplicate pair search over a project (core.jobs)."""

    kind = "near-duplicates"
    task_name = "exports.detect_near_duplicates"
    detail_template = "exports/_scan_detail.html"
    readers = ("lead", "reviewer")

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="dedup_scans")
    threshold = models.PositiveSmallIntegerField()
    items_scanned = models.PositiveIntegerField(default=0)
    max_item_id = models.BigIntegerField(default=0, help_text="Largest item id seen: later items are not scanned yet.")
    pairs_found = models.PositiveIntegerField(default=0)
    pairs_new = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "near-duplicate scan"


class ExportJob(Job):
    """A lead's request to build a release (core.jobs); publishes atomically or not at all."""

    kind = "release"
    task_name = "exports.build_release"
    detail_template = "exports/_build_detail.html"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="export_jobs")
    release = models.OneToOneField("Release", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "release build"
        constraints = [
            # One build at a time per project: two builds would race for the same number.
            models.UniqueConstraint(
                fields=["project"],
                condition=Q(status__in=["pending", "running"]),
                name="one_active_export_job_per_project",
            ),
        ]


class Release(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="releases")
    number = models.PositiveIntegerField(help_text="v1, v2, ... per project.")
    directory = models.CharField(max_length=300, help_text="Folder of the files, relative to the releases root.")
    manifest = models.JSONField(help_text="manifest.json: schema version, counts, sha256 of every file.")
    manifest_sha256 = models.CharField(max_length=64, help_text="sha256 of manifest.json; equal => identical release.")
    record_count = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id", "-number"]
        constraints = [models.UniqueConstraint(fields=["project", "number"], name="uniq_release_number")]

    def __str__(self) -> str:
        return f"{self.project.slug} v{self.number}"

    @property
    def label(self) -> str:
        return f"v{self.number}"
