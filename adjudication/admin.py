from django.contrib import admin

from adjudication.models import AdjudicationTask, GoldRecord, HistoryEvent, LexiconVersion
from core.admin import ReadOnlyAdmin


@admin.register(AdjudicationTask)
class AdjudicationTaskAdmin(ReadOnlyAdmin):
    list_display = ["id", "item_id", "status", "reason", "reviewer", "claimed_at", "resolved_at", "created_at"]
    list_filter = ["status", "reason", "item__project"]


@admin.register(GoldRecord)
class GoldRecordAdmin(ReadOnlyAdmin):
    """Gold revisions are immutable: a new decision adds a revision (adjudication.services)."""

    list_display = [
        "id",
        "item_id",
        "revision",
        "is_current",
        "decided_by",
        "schema_version",
        "lexicon_version",
        "created_at",
    ]
    list_filter = ["is_current", "item__project"]
    search_fields = ["item__source_id", "note"]


@admin.register(LexiconVersion)
class LexiconVersionAdmin(ReadOnlyAdmin):
    list_display = ["project", "version", "created_by", "change_note", "created_at"]
    list_filter = ["project"]


@admin.register(HistoryEvent)
class HistoryEventAdmin(ReadOnlyAdmin):
    list_display = ["id", "project", "item_id", "kind", "actor", "created_at"]
    list_filter = ["kind", "project"]
    date_hierarchy = "created_at"
