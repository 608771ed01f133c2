from django.contrib import admin

from core.admin import JobAdmin, ReadOnlyAdmin
from quality.models import AgreementReport, Audit, AuditItem


@admin.register(AgreementReport)
class AgreementReportAdmin(JobAdmin):
    list_display = [*JobAdmin.list_display, "filter_key"]
    exclude = ["result"]


class AuditItemInline(admin.TabularInline):
    model = AuditItem
    extra = 0
    can_delete = False
    readonly_fields = ["item", "stratum", "auditor", "annotation"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Audit)
class AuditAdmin(ReadOnlyAdmin):
    list_display = ["id", "project", "size", "seed", "include_untargeted", "created_by", "created_at"]
    list_filter = ["project"]
    inlines = [AuditItemInline]


@admin.register(AuditItem)
class AuditItemAdmin(ReadOnlyAdmin):
    list_display = ["id", "audit", "item_id", "stratum", "auditor", "annotation_id"]
    list_filter = ["audit__project"]
