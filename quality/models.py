"""Cached agreement reports and candidate-blind audits.

``AgreementReport`` is a cache row keyed by (project, filter key, data fingerprint): the
same filters over the same data are computed once; any new submission, lexicon version or
schema version changes the fingerprint, so a stale row is never served as current.

An ``Audit`` is a stratified sample of gold items (Meme3W Appendix A.2 "Candidate-blind
audit"); each ``AuditItem`` is one sampled item and the auditor it was given to. The blind
annotation itself is an ``annotation.Annotation`` of kind "audit" (made by
``annotation.services.annotation_audit_assign``), so the audit workspace is the annotation
app's, with no candidates loaded.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.models import Job
from projects.models import Item, Project


class AgreementReport(Job):
    """A cached report row and the job that computes it (core.jobs)."""

    kind = "agreement"
    task_name = "quality.compute_agreement_report"
    detail_template = "quality/_agreement_job_detail.html"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="agreement_reports")
    filters = models.JSONField(default=dict, help_text="Cleaned filters the report was computed for.")
    filter_key = models.CharField(max_length=64, help_text="sha256 of the canonical JSON of the filters.")
    fingerprint = models.CharField(max_length=64, help_text="sha256 of what the data looked like when requested.")
    result = models.JSONField(null=True, blank=True, help_text="The report (agreement figures + dashboard analytics).")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "agreement report"
        constraints = [
            models.UniqueConstraint(fields=["project", "filter_key", "fingerprint"], name="uniq_agreement_report_key"),
        ]
        indexes = [models.Index(fields=["project", "filter_key", "status"])]

    def __str__(self) -> str:
        return f"agreement report {self.pk} of {self.project} ({self.status})"


class Audit(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="audits")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    seed = models.BigIntegerField(
        help_text="Seed of the stratified sample: the same gold set and seed give the same sample."
    )
    size = models.PositiveIntegerField(help_text="Number of sampled gold items.")
    include_untargeted = models.BooleanField(
        default=False,
        help_text="Also sample gold items without a target (e.g. non-harmful); default: targeted items only, as in the paper.",
    )
    strata = models.JSONField(default=list, help_text="[{key, label, population, sampled}] of the stratification.")
    notes = models.JSONField(
        default=list, help_text="Warnings raised while sampling and assigning (e.g. no eligible auditor)."
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"audit {self.pk} of {self.project} (n={self.size})"


class AuditItem(models.Model):
    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="audit_items")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="audit_items")
    stratum = models.CharField(max_length=300, help_text="Stratum key (category x grounding condition).")
    auditor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Null when every auditor annotated the item.",
    )
    annotation = models.ForeignKey(
        "annotation.Annotation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The auditor's blind annotation (kind audit).",
    )

    class Meta:
        ordering = ["audit_id", "item_id"]
        constraints = [models.UniqueConstraint(fields=["audit", "item"], name="uniq_audit_item")]
