from django.urls import path

from annotation.models import Kind
from workflow import apis, views

urlpatterns = [
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
