from django.contrib import admin

from candidates.models import Candidate, CandidateJob, CandidateTask, Conversion, ConversionJob, Provider, RateLimitSlot
from core.admin import JobAdmin, ReadOnlyAdmin


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "kind", "model", "enabled", "requests_per_minute", "updated_at"]
    list_filter = ["kind", "enabled", "project"]
    search_fields = ["name", "model"]


@admin.register(CandidateJob)
class CandidateJobAdmin(JobAdmin):
    list_display = [*JobAdmin.list_display, "prompt_version"]


@admin.register(CandidateTask)
class CandidateTaskAdmin(ReadOnlyAdmin):
    list_display = ["id", "job", "item_id", "provider", "status", "attempts", "lease_until", "updated_at"]
    list_filter = ["status", "provider"]
    search_fields = ["error"]


@admin.register(Candidate)
class CandidateAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "item_id",
        "provider",
        "model_name",
        "prompt_version",
        "parse_error",
        "latency_ms",
        "created_at",
    ]
    list_filter = ["provider", "prompt_version"]
    search_fields = ["raw_reply", "model_name"]


@admin.register(RateLimitSlot)
class RateLimitSlotAdmin(ReadOnlyAdmin):
    list_display = ["provider", "tat"]


@admin.register(ConversionJob)
class ConversionJobAdmin(JobAdmin):
    """The LLM stage of a workflow (vikr conversion) as a job."""


@admin.register(Conversion)
class ConversionAdmin(ReadOnlyAdmin):
    list_display = ["id", "item_id", "stage", "status", "provider", "model_name", "attempts", "finished_at"]
    list_filter = ["status", "stage", "provider"]
    search_fields = ["raw_reply", "error", "model_name"]
