from django.contrib import admin

from projects.models import ImportJob, Item, Membership, Project


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "preset", "schema_version", "annotators_per_item"]
    inlines = [MembershipInline]


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "source_id", "stage", "language"]
    list_filter = ["project", "stage"]
    search_fields = ["source_id", "text"]
    raw_id_fields = ["duplicate_of"]


@admin.register(ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "source_name", "status", "imported", "created_at"]
