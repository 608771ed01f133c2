"""Admin helpers shared by the apps: read-only views of immutable records and the job columns."""

from __future__ import annotations

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """Immutable records (gold revisions, annotation revisions, releases, history): listed and
    inspected, never edited or deleted here (their services keep the invariants)."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class JobAdmin(ReadOnlyAdmin):
    """Every job kind (core.jobs): status, progress and liveness at a glance."""

    list_display = [
        "id",
        "project",
        "status",
        "phase",
        "progress_done",
        "progress_total",
        "created_at",
        "heartbeat_at",
        "attempts",
        "taken_over_at",
    ]
    list_filter = ["status", "project"]
    date_hierarchy = "created_at"
    search_fields = ["error", "phase"]
