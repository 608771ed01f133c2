from django.contrib import admin

from annotation.models import Annotation, AnnotationRevision, AnnotatorPreference, Assignment
from core.admin import ReadOnlyAdmin


@admin.register(Annotation)
class AnnotationAdmin(ReadOnlyAdmin):
    """Annotations change only through the annotation services (locks, versions, slots)."""

    list_display = [
        "id",
        "item_id",
        "annotator",
        "kind",
        "status",
        "version",
        "time_spent_ms",
        "first_submitted_at",
        "updated_at",
    ]
    list_filter = ["kind", "status", "item__project"]
    search_fields = ["annotator__username", "item__source_id"]
    date_hierarchy = "updated_at"


@admin.register(AnnotationRevision)
class AnnotationRevisionAdmin(ReadOnlyAdmin):
    list_display = ["id", "annotation_id", "version", "status", "saved_by", "saved_at"]
    list_filter = ["status"]


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ["id", "project", "item_id", "annotator", "kind", "status", "claimed_at", "expires_at"]
    list_filter = ["kind", "status", "project"]


@admin.register(AnnotatorPreference)
class AnnotatorPreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "project", "content_warning_accepted_at", "blur_images"]
    list_filter = ["project", "blur_images"]
