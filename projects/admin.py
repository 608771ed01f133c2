from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils.html import format_html

from core.admin import JobAdmin, ReadOnlyAdmin
from core.errors import ServiceError
from projects.models import (
    GuidelineVersion,
    ImportChunk,
    ImportJob,
    Invitation,
    Item,
    ItemOcr,
    ItemVariant,
    Membership,
    OcrChunk,
    OcrJob,
    Project,
    SchemaVersion,
    WorkerHeartbeat,
)
from projects.presets import PRESETS
from projects.services import check_name_slug, project_create


class ProjectCreateAdminForm(forms.ModelForm):
    """The admin's "add project" goes through projects.services.project_create: presets apply."""

    preset = forms.ChoiceField(choices=[(k, v.get("label", k)) for k, v in PRESETS.items()], initial="custom")
    copy_from = forms.ModelChoiceField(
        queryset=Project.objects.all(), required=False, help_text="Copy every setting of this project instead."
    )
    lead = forms.ModelChoiceField(queryset=get_user_model().objects.filter(is_active=True), required=False)

    class Meta:
        model = Project
        fields = ["name", "slug"]

    def clean(self):
        data = super().clean()
        try:
            check_name_slug(data.get("name", ""), data.get("slug", ""))
        except ServiceError as exc:
            for field, message in exc.errors.items():
                self.add_error(field if field in self.fields else None, message)
        return data

    def validate_unique(self):
        pass  # check_name_slug names a taken slug with a clearer message


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
    # Schema and guideline change only through their editors (validated, versioned).
    readonly_fields = ["preset", "schema_version", "schema", "guideline_version", "guideline", "editors"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = ProjectCreateAdminForm
            kwargs["fields"] = ["name", "slug", "preset", "copy_from", "lead"]
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is not None else []

    def get_inlines(self, request, obj):
        return self.inlines if obj is not None else []

    @admin.display(description="Edit")
    def editors(self, obj):
        return format_html(
            '<a href="{}">schema editor</a> · <a href="{}">guideline</a>',
            reverse("schema_editor", args=[obj.slug]),
            reverse("guideline_page", args=[obj.slug]),
        )

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        data = form.cleaned_data
        project = project_create(
            name=data["name"],
            slug=data["slug"],
            preset=data["preset"],
            lead=data.get("lead"),
            copy_from=data.get("copy_from"),
        )
        obj.__dict__.update({k: v for k, v in project.__dict__.items() if k != "_state"})
        obj._state = project._state


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "project", "role", "is_active", "created_at"]
    list_filter = ["role", "is_active", "project"]
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


@admin.register(OcrChunk)
class OcrChunkAdmin(ReadOnlyAdmin):
    list_display = ["job", "number", "status", "items_done", "attempts", "heartbeat_at"]
    list_filter = ["status"]
    list_select_related = ["job"]


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


@admin.register(GuidelineVersion)
class GuidelineVersionAdmin(ReadOnlyAdmin):
    list_display = ["project", "version", "note", "created_by", "created_at"]
    list_filter = ["project"]


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyAdmin):
    list_display = ["email", "project", "roles", "created_at", "expires_at", "accepted_at", "revoked_at"]
    list_filter = ["project"]
    exclude = ["token_sha256"]
