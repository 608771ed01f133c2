"""MLLM candidate annotations (SPEC section 1 step 1, Meme3W Stage 1).

A Provider is one configured model endpoint of a project; a CandidateJob is a lead's request to
produce candidates for a set of items; a CandidateTask is one (job, item, provider) unit of work;
a Candidate is the stored, normalized output of one provider for one item under one prompt
version. The unique constraint on Candidate (item, provider, prompt_version) is what makes a
redelivered Celery task unable to duplicate work.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Count, Q

from core.models import Job, JobStatus
from projects.models import Item, Project


class ProviderKind(models.TextChoices):
    OPENAI = "openai", "OpenAI"
    GEMINI = "gemini", "Google Gemini"
    OPENAI_COMPATIBLE = "openai-compatible", "OpenAI-compatible server (vLLM, Ollama, SGLang)"
    REPLAY = "replay", "Replay a JSONL file"


class Provider(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="providers")
    name = models.CharField(max_length=80, help_text="Name shown to leads and researchers; never shown to annotators.")
    kind = models.CharField(max_length=20, choices=ProviderKind.choices, help_text="Client used to call the model.")
    model = models.CharField(
        max_length=200, help_text="Model name sent to the endpoint (e.g. gpt-4o, gemini-2.5-flash)."
    )
    base_url = models.CharField(
        max_length=500,
        blank=True,
        help_text="Endpoint base URL (required for openai-compatible; optional override otherwise).",
    )
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        help_text="NAME of the environment variable holding the API key. The key itself is never stored.",
    )
    replay_file = models.CharField(
        max_length=100,
        blank=True,
        help_text="replay: name of a JSONL file in the project's replay folder (uploaded on the providers page), "
        'one {"source_id"|"item_id"|"import_key", "reply"} per line.',
    )
    requests_per_minute = models.PositiveIntegerField(
        default=60, help_text="Rate limit shared by all workers for this provider."
    )
    timeout_seconds = models.FloatField(default=60.0, help_text="Per-request timeout in seconds.")
    enabled = models.BooleanField(default=True, help_text="Disabled providers take no part in new jobs.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="uniq_provider_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind}:{self.model})"


class CandidateJob(Job):
    """A lead's request for candidates (core.jobs). Its work is the CandidateTask rows: the job's
    own task publishes them, each is run by its own Celery task, and the last one to finish
    ends the job. Every task outcome renews the job's heartbeat, so a job whose tasks all went
    silent (a killed worker, a lost message) is taken over: its task re-publishes what is left."""

    kind = "candidates"
    task_name = "candidates.run_job"
    detail_template = "candidates/_job_detail.html"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="candidate_jobs")
    prompt_version = models.CharField(max_length=40, help_text="Prompt version every task of the job uses.")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "candidate job"

    def provider_progress(self) -> list[dict]:
        """done / failed / pending / running per provider, in one aggregate query."""
        S = JobStatus
        return list(
            self.tasks.values("provider_id", "provider__name")
            .annotate(
                total=Count("id"),
                done=Count("id", filter=Q(status=S.DONE)),
                failed=Count("id", filter=Q(status=S.FAILED)),
                pending=Count("id", filter=Q(status=S.PENDING)),
                running=Count("id", filter=Q(status=S.RUNNING)),
                cancelled=Count("id", filter=Q(status=S.CANCELLED)),
            )
            .order_by("provider__name", "provider_id")
        )

    def totals(self) -> dict[str, int]:
        rows = self.provider_progress()
        return {k: sum(r[k] for r in rows) for k in ("total", "done", "failed", "pending", "running", "cancelled")}

    def failures(self, limit: int = 50):
        return (
            self.tasks.filter(status=JobStatus.FAILED)
            .select_related("provider")
            .order_by("provider__name", "item_id")[:limit]
        )


class CandidateTask(models.Model):
    """One unit of work: ask one provider about one item, on the job mechanism's statuses."""

    Status = JobStatus

    job = models.ForeignKey(CandidateJob, on_delete=models.CASCADE, related_name="tasks")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="candidate_tasks")
    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="tasks")
    status = models.CharField(max_length=12, choices=JobStatus.choices, default=JobStatus.PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, help_text="Last error (shown to leads only).")
    lease_until = models.DateTimeField(
        null=True, blank=True, help_text="While set and in the future, one execution is calling the provider."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "item", "provider"], name="uniq_candidate_task"),
        ]
        indexes = [models.Index(fields=["job", "provider", "status"])]


class Candidate(models.Model):
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="candidates")
    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="candidates")
    prompt_version = models.CharField(max_length=40, help_text="Version of the prompt that produced this candidate.")
    model_name = models.CharField(
        max_length=200, help_text="Model name at generation time (as reported by the endpoint when available)."
    )
    raw_reply = models.TextField(help_text="The model's reply, verbatim.")
    think = models.TextField(blank=True, help_text="The model's `think` field (its analysis steps).")
    fields = models.JSONField(default=dict, help_text="Normalized schema fields that passed validation.")
    removed = models.JSONField(default=list, help_text="[{field, reason, value}] removed during normalization.")
    parse_error = models.TextField(blank=True, help_text="Set when no JSON object could be read from the reply.")
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["item", "provider", "prompt_version"], name="uniq_candidate_item_provider_prompt"
            ),
        ]

    @property
    def ok(self) -> bool:
        return not self.parse_error


class RateLimitSlot(models.Model):
    """Database rate-limit state of one provider, used when Redis is not configured.

    ``tat`` is the GCRA "theoretical arrival time": the earliest moment the next request may
    start. Read and advanced under ``select_for_update`` (PostgreSQL) or SQLite's write lock
    (``transaction_mode=IMMEDIATE``), so the limit holds across worker processes.
    """

    provider = models.OneToOneField(Provider, on_delete=models.CASCADE, related_name="rate_slot")
    tat = models.FloatField(default=0.0, help_text="Unix time before which no new request may be scheduled.")


class ConversionJob(Job):
    """Runs a project's pending conversions (projects.workflow model stages): started when an
    item enters a model stage, or by a lead's retry. The Celery task lives in workflow (it moves
    the converted items on to their review stage, a step above this app)."""

    kind = "conversion"
    task_name = "workflow.run_conversions"
    readers = ("lead",)

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="conversion_jobs")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "conversion job"


class Conversion(models.Model):
    """One item's conversion by a model stage (MemeBench: the reference explanation converted
    into the VIKR checklists by an LLM). One row per (item, stage); a retry resets it. The
    reply is kept verbatim; ``values`` holds what the review stage starts from and ``flags``
    what the automated checks found (shown to the reviewer, never fixed silently)."""

    Status = JobStatus

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="conversions")
    stage = models.PositiveSmallIntegerField(help_text="Index of the model stage (projects.workflow).")
    status = models.CharField(max_length=12, choices=JobStatus.choices, default=JobStatus.PENDING, db_index=True)
    provider = models.ForeignKey(
        Provider,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="conversions",
        help_text="The provider that converted (leads and researchers only; never shown to annotators).",
    )
    model_name = models.CharField(max_length=200, blank=True, help_text="Model name reported with the reply.")
    prompt_sha = models.CharField(max_length=16, blank=True, help_text="sha256 prefix of the prompt sent.")
    attempts = models.PositiveIntegerField(default=0)
    lease_until = models.DateTimeField(
        null=True, blank=True, help_text="While set and in the future, one execution is calling the provider."
    )
    raw_reply = models.TextField(blank=True, help_text="The model's reply, verbatim.")
    values = models.JSONField(default=dict, blank=True, help_text="The stage's fields read from the reply.")
    flags = models.JSONField(
        default=list, blank=True, help_text='Automated-check findings [{"check", "field", "item", "message"}].'
    )
    error = models.TextField(blank=True, help_text="Why the conversion failed (provider error, unreadable reply).")
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["item", "stage"], name="uniq_conversion_item_stage")]
        indexes = [models.Index(fields=["status", "item"])]

    def __str__(self) -> str:
        return f"conversion of item {self.item_id} (stage {self.stage}, {self.status})"
