"""Routes of the annotation app: pages under /p/<slug>/annotate|audit/, JSON under /api/projects/<slug>/."""

from django.urls import path

from annotation import apis, views
from annotation.models import Kind

urlpatterns = [
    path("p/<slug:slug>/annotate/", views.annotate_home, name="annotate_home"),
    path("p/<slug:slug>/annotate/next", views.annotate_next, name="annotate_next"),
    path("p/<slug:slug>/annotate/progress", views.annotate_progress, name="annotate_progress"),
    path("p/<slug:slug>/annotate/warning", views.annotate_warning, name="annotate_warning"),
    path("p/<slug:slug>/annotate/preferences", views.annotate_preferences, name="annotate_preferences"),
    path("p/<slug:slug>/annotate/guideline-read", views.annotate_guideline_seen, name="annotate_guideline_seen"),
    path("p/<slug:slug>/annotate/<int:item_id>/", views.annotate_item, name="annotate_item"),
    path("p/<slug:slug>/annotate/<int:item_id>/skip", views.annotate_skip, name="annotate_skip"),
    path(
        "p/<slug:slug>/items/<int:item_id>/candidates/",
        views.item_candidates_anonymous,
        name="candidate_item_anonymous",
    ),
    path(
        "api/projects/<slug:slug>/items/<int:item_id>/candidates/",
        apis.ItemCandidatesApi.as_view(),
        name="api_item_candidates",
    ),
    path("p/<slug:slug>/audit/", views.audit_home, name="audit_home"),
    path("p/<slug:slug>/audit/next", views.audit_next, name="audit_next"),
    path("p/<slug:slug>/audit/<int:item_id>/", views.audit_item, name="audit_item"),
    # JSON API (autosave / submit / skip / next); the audit variants bind kind="audit".
    path("api/projects/<slug:slug>/annotate/next", apis.AnnotationNextApi.as_view(), name="api_annotate_next"),
    path(
        "api/projects/<slug:slug>/annotate/<int:item_id>/", apis.AnnotationStateApi.as_view(), name="api_annotate_state"
    ),
    path(
        "api/projects/<slug:slug>/annotate/<int:item_id>/draft",
        apis.AnnotationDraftApi.as_view(),
        name="api_annotate_draft",
    ),
    path(
        "api/projects/<slug:slug>/annotate/<int:item_id>/skip",
        apis.AnnotationSkipApi.as_view(),
        name="api_annotate_skip",
    ),
    path(
        "api/projects/<slug:slug>/audit/<int:item_id>/",
        apis.AnnotationStateApi.as_view(),
        {"kind": Kind.AUDIT},
        name="api_audit_state",
    ),
    path(
        "api/projects/<slug:slug>/audit/<int:item_id>/draft",
        apis.AnnotationDraftApi.as_view(),
        {"kind": Kind.AUDIT},
        name="api_audit_draft",
    ),
    path(
        "api/projects/<slug:slug>/audit/<int:item_id>/skip",
        apis.AnnotationSkipApi.as_view(),
        {"kind": Kind.AUDIT},
        name="api_audit_skip",
    ),
]
