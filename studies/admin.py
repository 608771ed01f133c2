"""Independence studies in the admin: read-only (studies.services keeps blindness and eligibility)."""

from django.contrib import admin

from core.admin import ReadOnlyAdmin
from studies.models import Reexplanation, Study, StudyItem


@admin.register(Study)
class StudyAdmin(ReadOnlyAdmin):
    list_display = ["id", "project", "name", "status", "sample_size", "seed", "created_at"]
    list_filter = ["status", "project"]
    search_fields = ["name"]


@admin.register(StudyItem)
class StudyItemAdmin(ReadOnlyAdmin):
    list_display = ["id", "study", "item_id", "stratum_label", "status", "verdict", "verdict_source", "revisions"]
    list_filter = ["status", "verdict", "study"]


@admin.register(Reexplanation)
class ReexplanationAdmin(ReadOnlyAdmin):
    list_display = ["id", "study_item", "slot", "participant", "status", "verdict", "submitted_at"]
    list_filter = ["status", "verdict"]
