"""Evaluation records in the admin: read-only (their services keep the invariants)."""

from django.contrib import admin

from core.admin import JobAdmin, ReadOnlyAdmin
from evaluation.models import CalibrationSet, JudgeRun, JudgeVerdict, ProviderRun, Submission


@admin.register(Submission)
class SubmissionAdmin(ReadOnlyAdmin):
    list_display = ["id", "project", "release", "split", "model_name", "source", "created_at"]
    list_filter = ["source", "split", "project"]
    search_fields = ["model_name", "description"]


@admin.register(ProviderRun)
class ProviderRunAdmin(JobAdmin):
    """A candidate provider run on a release split."""


@admin.register(JudgeRun)
class JudgeRunAdmin(JobAdmin):
    """Two LLM judges scoring a VIKR submission."""


@admin.register(JudgeVerdict)
class JudgeVerdictAdmin(ReadOnlyAdmin):
    list_display = ["id", "submission", "provider", "item_id", "model_name", "created_at"]
    list_filter = ["provider"]
    search_fields = ["item_id"]


@admin.register(CalibrationSet)
class CalibrationSetAdmin(ReadOnlyAdmin):
    list_display = ["id", "submission", "name", "created_by", "created_at"]
