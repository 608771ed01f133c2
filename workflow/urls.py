from django.urls import path

from annotation.models import Kind
from workflow import apis, views

urlpatterns = [
    path("p/<slug:slug>/setup/schema/", views.schema_editor, name="schema_editor"),
    path("p/<slug:slug>/setup/schema/preview", views.schema_preview, name="schema_preview"),
    path("p/<slug:slug>/setup/schema/check", views.schema_preview_check, name="schema_preview_check"),
    path("p/<slug:slug>/setup/schema/export", views.schema_export, name="schema_export"),
    path("p/<slug:slug>/setup/members/", views.members_page, name="members_page"),
    path("p/<slug:slug>/setup/settings/", views.settings_page, name="settings_page"),
    path("p/<slug:slug>/conversions/", views.conversions_page, name="conversions_page"),
    path("p/<slug:slug>/setup/settings/split-preview", views.settings_split_preview, name="settings_split_preview"),
    path("api/projects/<slug:slug>/schema/", apis.SchemaApi.as_view(), name="api_schema_edit"),
    path("api/projects/<slug:slug>/schema/check", apis.SchemaCheckApi.as_view(), name="api_schema_check"),
    path("api/projects/<slug:slug>/members/", apis.MemberListApi.as_view(), name="api_members"),
    path("api/projects/<slug:slug>/members/<int:user_id>/", apis.MemberApi.as_view(), name="api_member"),
    path("api/projects/<slug:slug>/members/csv", apis.MemberCsvApi.as_view(), name="api_members_csv"),
    path("api/projects/<slug:slug>/invitations/", apis.InvitationApi.as_view(), name="api_invitations"),
    path(
        "api/projects/<slug:slug>/invitations/<int:invitation_id>/revoke",
        apis.InvitationRevokeApi.as_view(),
        name="api_invitation",
    ),
    path("api/projects/<slug:slug>/settings/", apis.StudySettingsApi.as_view(), name="api_settings"),
    path("api/projects/<slug:slug>/conversions/", apis.ConversionsApi.as_view(), name="api_conversions"),
    path(
        "api/projects/<slug:slug>/conversions/retry",
        apis.ConversionRetryApi.as_view(),
        name="api_conversions_retry",
    ),
    path(
        "api/projects/<slug:slug>/conversions/<int:conversion_id>/",
        apis.ConversionApi.as_view(),
        name="api_conversion",
    ),
    path("p/<slug:slug>/annotate/<int:item_id>/flag", views.annotate_flag, name="annotate_flag"),
    path(
        "api/projects/<slug:slug>/annotate/<int:item_id>/flag",
        apis.AnnotationFlagApi.as_view(),
        name="api_annotate_flag",
    ),
    path(
        "api/projects/<slug:slug>/annotate/<int:item_id>/submit",
        apis.AnnotationSubmitApi.as_view(),
        name="api_annotate_submit",
    ),
    path(
        "api/projects/<slug:slug>/audit/<int:item_id>/submit",
        apis.AnnotationSubmitApi.as_view(),
        {"kind": Kind.AUDIT},
        name="api_audit_submit",
    ),
]
