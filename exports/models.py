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

    #: The phase of a scan finished from the last one (exports.services._scan_reused).
    REUSED_PHASE = "no item since the last scan: its pairs stand"

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "near-duplicate scan"

    @property
    def reused(self) -> bool:
        return self.status == self.Status.DONE and self.phase == self.REUSED_PHASE


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
    archive_sha256 = models.CharField(
        max_length=64, blank=True, help_text="sha256 of the release's zip archive (exports.archive), its ETag."
    )
    archive_bytes = models.PositiveBigIntegerField(default=0, help_text="Size of the zip archive in bytes.")
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


DEFAULT_CONTENT_WARNING = (
    "This dataset contains memes that may be offensive, hateful or disturbing (attacks on groups, "
    "slurs, violent or sexual imagery). They are collected to study and detect such content; view "
    "them with care."
)


class ReleaseSettings(models.Model):
    """What a lead says about the dataset in every release's card and datasheet (Hugging Face
    front matter, Gebru et al. datasheet, Croissant): snapshotted into each release's manifest
    when it is built, so editing them never changes a published release."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="release_settings")
    pretty_name = models.CharField(
        max_length=200, blank=True, help_text="Dataset name on the card (default: project name)."
    )
    license = models.CharField(
        max_length=60,
        default="other",
        help_text="Hugging Face / SPDX-style license id of the annotations, e.g. cc-by-4.0, cc-by-nc-sa-4.0, other.",
    )
    license_name = models.CharField(max_length=200, blank=True, help_text="Full license name (needed for 'other').")
    license_url = models.URLField(blank=True, help_text="Where the license text is.")
    summary = models.TextField(blank=True, help_text="One paragraph: what the dataset is.")
    motivation = models.TextField(
        blank=True, help_text="Why the dataset was created, for which task, filling which gap."
    )
    creators = models.TextField(blank=True, help_text="One per line: name (affiliation).")
    funding = models.TextField(blank=True, help_text="Who funded the creation (grants, numbers).")
    languages = models.CharField(
        max_length=200, blank=True, help_text="ISO 639-1 codes, comma separated (default: the items' languages)."
    )
    task_categories = models.CharField(
        max_length=200,
        blank=True,
        help_text="Hugging Face task categories, comma separated (default from the preset).",
    )
    collection = models.TextField(blank=True, help_text="How and where the memes were collected, over what period.")
    annotators = models.TextField(
        blank=True, help_text="Who annotated (recruitment, training, pay, demographics where known and consented)."
    )
    intended_uses = models.TextField(blank=True, help_text="What the dataset is for.")
    prohibited_uses = models.TextField(blank=True, help_text="Uses the creators forbid or advise against.")
    limitations = models.TextField(blank=True, help_text="Known biases and limitations.")
    personal_information = models.TextField(
        blank=True, help_text="Personal or sensitive information the data may contain, and what was done about it."
    )
    maintenance = models.TextField(blank=True, help_text="Who maintains the dataset, how errata and updates come out.")
    contact = models.CharField(max_length=300, blank=True, help_text="Contact for questions and takedown requests.")
    homepage = models.URLField(blank=True)
    citation = models.TextField(blank=True, help_text="BibTeX entry researchers should cite.")
    content_warning = models.TextField(default=DEFAULT_CONTENT_WARNING, blank=True)
    hub_repo = models.CharField(
        max_length=200, blank=True, help_text="Hugging Face Hub dataset repo (owner/name) releases are pushed to."
    )
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "release settings"
        verbose_name_plural = "release settings"

    def __str__(self) -> str:
        return f"release settings of {self.project.slug}"


class HubPush(Job):
    """Pushing a published release to a Hugging Face Hub dataset repo (core.jobs)."""

    kind = "hub-push"
    task_name = "exports.push_to_hub"
    detail_template = "exports/_push_detail.html"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="hub_pushes")
    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="hub_pushes")
    repo_id = models.CharField(max_length=200, help_text="owner/name of the Hub dataset repo.")
    commit_url = models.CharField(max_length=500, blank=True, help_text="The Hub commit, once pushed.")
    files = models.PositiveIntegerField(default=0, help_text="Files sent.")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "push to the Hugging Face Hub"
