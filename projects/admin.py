from django.contrib import admin

from core.admin import JobAdmin, ReadOnlyAdmin
from projects.models import (
    ImportChunk,
    ImportJob,
    Item,
    ItemOcr,
    ItemVariant,
    Membership,
    OcrJob,
    Project,
    SchemaVersion,
    WorkerHeartbeat,
)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    raw_id_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "preset", "schema_version", "annotators_per_item", "created_at"]
    list_filter = ["preset"]
    search_fields = ["name", "slug"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "project", "role", "created_at"]
    list_filter = ["role", "project"]
    search_fields = ["user__username", "user__email", "project__slug"]
    raw_id_fields = ["user"]


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "source_id", "stage", "language", "redistributable", "created_at"]
    list_filter = ["project", "stage", "redistributable", "language"]
    search_fields = ["source_id", "text", "import_key"]
    raw_id_fields = ["duplicate_of"]
    readonly_fields = ["import_key", "image", "image_sha256", "image_format", "width", "height", "pixel_hash", "phash"]


@admin.register(SchemaVersion)
class SchemaVersionAdmin(ReadOnlyAdmin):
    list_display = ["project", "version", "created_at"]
    list_filter = ["project"]


@admin.register(ImportJob)
class ImportJobAdmin(JobAdmin):
    list_display = [*JobAdmin.list_display, "source_name", "imported", "refused"]
    search_fields = ["source_name", "error"]


@admin.register(ImportChunk)
class ImportChunkAdmin(ReadOnlyAdmin):
    list_display = ["job", "number", "status", "rows", "rows_done", "imported", "refused", "attempts", "heartbeat_at"]
    list_filter = ["status"]
    list_select_related = ["job"]


@admin.register(OcrJob)
class OcrJobAdmin(JobAdmin):
    list_display = [*JobAdmin.list_display, "items_read", "texts_filled", "unreadable"]


@admin.register(ItemOcr)
class ItemOcrAdmin(ReadOnlyAdmin):
    list_display = ["item", "engine", "error", "created_at"]
    search_fields = ["text"]
    raw_id_fields = ["item"]


@admin.register(ItemVariant)
class ItemVariantAdmin(ReadOnlyAdmin):
    list_display = ["item", "kind", "source", "width", "height", "created_by", "created_at"]
    list_filter = ["kind", "source"]
    raw_id_fields = ["item"]


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(ReadOnlyAdmin):
    list_display = ["token", "hostname", "created_at"]
