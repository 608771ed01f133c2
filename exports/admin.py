from django.contrib import admin

from core.admin import JobAdmin, ReadOnlyAdmin
from exports.models import DedupScan, ExportJob, HubPush, NearDuplicatePair, Release, ReleaseSettings


@admin.register(Release)
class ReleaseAdmin(ReadOnlyAdmin):
    """Releases are immutable once published (exports.services publishes them atomically)."""

    list_display = ["project", "number", "record_count", "manifest_sha256", "created_by", "created_at"]
    list_filter = ["project"]
    exclude = ["manifest"]


@admin.register(ExportJob)
class ExportJobAdmin(JobAdmin):
    list_display = [*JobAdmin.list_display, "release"]


@admin.register(DedupScan)
class DedupScanAdmin(JobAdmin):
    list_display = [*JobAdmin.list_display, "threshold", "items_scanned", "pairs_found", "pairs_new"]


@admin.register(NearDuplicatePair)
class NearDuplicatePairAdmin(ReadOnlyAdmin):
    list_display = ["id", "project", "item_a_id", "item_b_id", "distance", "status", "reviewed_by", "reviewed_at"]
    list_filter = ["status", "project"]


@admin.register(HubPush)
class HubPushAdmin(JobAdmin):
    list_display = [*JobAdmin.list_display, "release", "repo_id", "files", "commit_url"]


@admin.register(ReleaseSettings)
class ReleaseSettingsAdmin(admin.ModelAdmin):
    """The dataset card's settings of a project (the lead edits them on the releases page)."""

    list_display = ["project", "pretty_name", "license"]
    raw_id_fields = ["project"]
