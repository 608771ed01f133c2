from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.models import Job, JobChunk
from projects.schema import Schema
from projects.workflow import Workflow


class Role(models.TextChoices):
    ANNOTATOR = "annotator", "Annotator"
    REVIEWER = "reviewer", "Reviewer"
    AUDITOR = "auditor", "Auditor"
    LEAD = "lead", "Project lead"
    RESEARCHER = "researcher", "Researcher"


class Stage(models.TextChoices):
    # Pipeline stage of an item (SPEC section 1); changed only by services.
    NEW = "new", "Awaiting candidates"
    ANNOTATING = "annotating", "Annotating"
    ADJUDICATION = "adjudication", "In adjudication"
    GOLD = "gold", "Gold"
    EXCLUDED = "excluded", "Excluded"


_WORKFLOWS: dict[tuple, Workflow] = {}


class Project(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True, help_text="URL name of the project.")
    preset = models.CharField(max_length=40, help_text="Preset the schema was created from (meme3w, aha, memecap).")
    schema = models.JSONField(help_text="The annotation schema: {version, fields: [...]}.")
    schema_version = models.PositiveIntegerField(default=1, help_text="Increments with every schema change.")
    guideline = models.TextField(blank=True, help_text="Guideline and taxonomy shown to annotators.")
    annotators_per_item = models.PositiveSmallIntegerField(default=2, help_text="N distinct annotators per item.")
    thresholds = models.JSONField(
        default=dict, blank=True, help_text="Disagreement thresholds overriding SPEC defaults."
    )
    auto_merge_rules = models.JSONField(
        default=list,
        blank=True,
        help_text="Rules that settle minor differences without a reviewer: entity_canonical, boxes_mean.",
    )
    claim_timeout_minutes = models.PositiveIntegerField(default=60)
    session_item_cap = models.PositiveIntegerField(
        default=0, help_text="Most items an annotator may submit per session (welfare); 0 = no cap."
    )
    phash_threshold = models.PositiveSmallIntegerField(
        default=8, help_text="Hamming distance for near-duplicate pairs."
    )
    split_ratios = models.JSONField(default=list, blank=True, help_text="[train, val, test], default 85/5/10.")
    split_seed = models.IntegerField(default=0)
    ocr_on_import = models.BooleanField(
        default=False,
        help_text="Read every imported image with OCR (projects.ocr): its text and boxes are stored, a "
        "text-free variant is painted, and a row with no text takes the OCR text.",
    )
    workflow = models.JSONField(
        default=list,
        blank=True,
        help_text="Stages as data (projects.workflow): fields, annotators, who, what is shown, gold mode. "
        "Empty: one stage, every field, adjudicated.",
    )
    skip_reasons = models.JSONField(
        default=list,
        blank=True,
        help_text="[[key, label], ...] offered when an annotator skips an item; empty: the preset's reasons.",
    )
    guideline_version = models.PositiveIntegerField(default=1, help_text="Increments with every guideline change.")
    audit_sample_size = models.PositiveIntegerField(
        default=200, help_text="Items in a candidate-blind audit (Meme3W: 200), the default of the audit form."
    )
    audit_strata = models.JSONField(
        default=list,
        blank=True,
        help_text="Schema fields the audit sample is stratified over; empty: the schema's stratum and grounding fields.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        permissions = [("create_project", "Can create projects (and lead them)")]

    def __str__(self) -> str:
        return self.name

    def get_schema(self):
        return Schema(self.schema)

    def get_workflow(self) -> Workflow:
        """The project's workflow, parsed once per distinct settings (claims and saves ask for it
        on every request)."""
        key = (
            self.pk,
            self.schema_version,
            repr(self.schema),
            self.annotators_per_item,
            repr(self.workflow),
            repr(self.split_ratios),
            self.split_seed,
        )
        found = _WORKFLOWS.get(key)
        if found is None:
            found = Workflow.for_project(self)
            if len(_WORKFLOWS) > 256:
                _WORKFLOWS.clear()
            _WORKFLOWS[key] = found
        return found


class SchemaVersion(models.Model):
    """Every schema a project has had; annotations record the version they were made under."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="schema_versions")
    version = models.PositiveIntegerField()
    schema = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "version"], name="uniq_schema_version")]


class GuidelineVersion(models.Model):
    """Every guideline a project has had (Markdown); annotations record the version they were made under."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="guideline_versions")
    version = models.PositiveIntegerField()
    text = models.TextField(help_text="Markdown; rendered without raw HTML.")
    note = models.CharField(max_length=300, blank=True, help_text="What changed, shown to annotators.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id", "version"]
        constraints = [models.UniqueConstraint(fields=["project", "version"], name="uniq_guideline_version")]


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices)
    is_active = models.BooleanField(
        default=True, help_text="False: deactivated; the person's past work stays, they cannot act in the project."
    )
    deactivated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user", "role"], name="uniq_membership_role")]
        indexes = [models.Index(fields=["user", "project"])]

    def __str__(self) -> str:
        return f"{self.user} {self.role} in {self.project}"


class Invitation(models.Model):
    """A one-time, expiring link that lets a new person set a password and join with roles.

    Only the sha256 of the token is stored: the link is shown once, to the lead who made it."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    roles = models.JSONField(help_text="Roles the invitee gets on accepting.")
    token_sha256 = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    accepted_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"invitation of {self.email} to {self.project}"


class Item(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="items")
    import_key = models.CharField(
        max_length=64, help_text="source id, or a hash of pixels + text: makes re-imports idempotent."
    )
    image = models.CharField(max_length=200, help_text="Content-addressed path under MEDIA_ROOT.")
    image_sha256 = models.CharField(max_length=64, help_text="sha256 of the stored image file.")
    image_format = models.CharField(max_length=10, help_text="Format detected by Pillow (JPEG, PNG, ...).")
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    pixel_hash = models.CharField(max_length=64, db_index=True, help_text="sha256 of the decoded RGB pixels.")
    phash = models.CharField(max_length=16, help_text="64-bit perceptual hash (imagehash.phash), hex.")
    text = models.TextField(help_text="Text associated with the meme (caption / OCR).")
    text_from_ocr = models.BooleanField(
        default=False, help_text="The manifest gave no text: the text is what OCR read in the image."
    )
    title = models.CharField(max_length=500, blank=True)
    source_dataset = models.CharField(max_length=200, blank=True)
    source_id = models.CharField(max_length=200, blank=True)
    language = models.CharField(max_length=20, blank=True)
    domain = models.CharField(max_length=100, blank=True)
    redistributable = models.BooleanField(
        default=False, help_text="License allows redistributing the image in exports."
    )
    metadata = models.JSONField(default=dict, blank=True)
    stage = models.CharField(max_length=20, choices=Stage.choices, default=Stage.NEW, db_index=True)
    workflow_stage = models.PositiveSmallIntegerField(
        default=0, help_text="While annotating: the index of the workflow stage the item is in."
    )
    split = models.CharField(
        max_length=5,
        blank=True,
        help_text="Split pinned before release (a stage whose annotator count depends on it); releases keep it.",
    )
    excluded_reason = models.CharField(
        max_length=500, blank=True, help_text="Why the item left the dataset (an annotator's flag), if it did."
    )
    duplicate_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="exact_duplicates",
        help_text="First imported item with the same decoded pixels.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "import_key"], name="uniq_item_import_key"),
            models.UniqueConstraint(
                fields=["project", "source_id"], condition=~Q(source_id=""), name="uniq_item_source_id"
            ),
        ]
        indexes = [models.Index(fields=["project", "stage"]), models.Index(fields=["project", "pixel_hash"])]

    def __str__(self) -> str:
        return f"item {self.pk} ({self.source_id or self.import_key[:8]})"


class ImportJob(Job):
    """An import of a folder or zip (projects.imports). The job's task reads the manifest once
    into chunks (ImportChunk) that any number of workers import; the last chunk to end
    publishes the report. Rows commit one by one and are idempotent (``Item.import_key``)."""

    kind = "import"
    task_name = "projects.import_items"
    detail_template = "projects/_import_detail.html"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="import_jobs")
    source_name = models.CharField(max_length=300, help_text="Uploaded file name or path.")
    source_path = models.CharField(max_length=500, blank=True, help_text="Folder or zip the rows are read from.")
    upload_path = models.CharField(
        max_length=500, blank=True, help_text="Temporary upload, deleted when the job ends (never served)."
    )
    imported = models.PositiveIntegerField(default=0)
    already_present = models.PositiveIntegerField(default=0)
    exact_duplicates = models.PositiveIntegerField(default=0)
    refused = models.PositiveIntegerField(default=0, help_text="Rows refused, all kinds together.")
    errors = models.JSONField(
        default=list,
        help_text="[{row, source_id, image, reason, kind}]: the first "
        "problems of each kind (see error_counts for the totals).",
    )
    error_counts = models.JSONField(default=dict, help_text="{kind: number of rows refused for it}.")
    planned = models.BooleanField(default=False, help_text="The manifest was read into chunks.")
    plan_report = models.JSONField(default=dict, help_text="Rows refused while reading the manifest.")
    stopped_reason = models.TextField(blank=True, help_text="Why reading the manifest stopped early, if it did.")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "import"

    @property
    def title(self) -> str:
        return self.source_name


class ImportChunk(JobChunk):
    """Up to projects.imports.CHUNK_ROWS rows of an import, imported by whichever worker
    claims it; counters and ``rows_done`` are checkpointed together (a chunk taken over from a
    lost worker resumes after its last checkpoint)."""

    job = models.ForeignKey(ImportJob, on_delete=models.CASCADE, related_name="chunks")
    first_row = models.PositiveIntegerField(help_text="Manifest line of the chunk's first row.")
    rows = models.PositiveIntegerField()
    rows_done = models.PositiveIntegerField(default=0)
    first_started_at = models.DateTimeField(null=True, blank=True)
    imported = models.PositiveIntegerField(default=0)
    already_present = models.PositiveIntegerField(default=0)
    exact_duplicates = models.PositiveIntegerField(default=0)
    refused = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list)
    error_counts = models.JSONField(default=dict)

    class Meta:
        ordering = ["job", "number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="uniq_import_chunk")]


class ItemOcr(models.Model):
    """What OCR read in an item's image (lib.ocr): the text in reading order and its lines."""

    item = models.OneToOneField(Item, on_delete=models.CASCADE, related_name="ocr")
    text = models.TextField(blank=True)
    lines = models.JSONField(
        default=list, help_text="[{text, score, box: [x1, y1, x2, y2] in 0..1000, polygon: [[x, y], ...] pixels}]"
    )
    engine = models.CharField(max_length=80, help_text="Engine and version that read it.")
    error = models.CharField(max_length=300, blank=True, help_text="Why the image could not be read, if so.")
    created_at = models.DateTimeField(auto_now_add=True)


class VariantSource(models.TextChoices):
    INPAINTED = "inpainted", "painted out from the OCR boxes"
    UPLOADED = "uploaded", "uploaded by a lead"


class ItemVariant(models.Model):
    """A derived image of an item (the text-free variant MemeCap's first round looks at)."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="variants")
    kind = models.CharField(max_length=20, help_text="Which variant (projects.workflow.IMAGES).")
    source = models.CharField(max_length=20, choices=VariantSource.choices)
    image = models.CharField(max_length=200, help_text="Content-addressed path under MEDIA_ROOT.")
    image_sha256 = models.CharField(max_length=64)
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "kind"], name="uniq_item_variant")]


class OcrJob(Job):
    """OCR and text-free variants of a project's items that have none yet (projects.ocr)."""

    kind = "ocr"
    task_name = "projects.ocr_items"
    detail_template = "projects/_ocr_detail.html"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="ocr_jobs")
    items_read = models.PositiveIntegerField(default=0)
    texts_filled = models.PositiveIntegerField(default=0, help_text="Items whose text came from OCR.")
    unreadable = models.PositiveIntegerField(default=0)
    planned = models.BooleanField(default=False, help_text="The items to read were split into chunks.")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "OCR run"


class OcrChunk(JobChunk):
    """Up to projects.ocr.CHUNK_ITEMS items of an OCR run, read by whichever worker claims it.
    Each item is stored in its own transaction and skipped once read, so a chunk taken over
    from a lost worker goes on with the items still lacking a result; the job's counts are
    read from what was stored when the last chunk ends (exact, whatever was retried)."""

    job = models.ForeignKey(OcrJob, on_delete=models.CASCADE, related_name="chunks")
    item_ids = models.JSONField(help_text="The items of this chunk (ids, ascending).")
    items_done = models.PositiveIntegerField(default=0, help_text="Items read so far (progress).")

    class Meta:
        ordering = ["job", "number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="uniq_ocr_chunk")]


class WorkerHeartbeat(models.Model):
    """Written by a Celery task: proves a worker consumed the broker and reached the database."""

    token = models.CharField(max_length=64, unique=True)
    hostname = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
