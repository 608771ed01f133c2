"""REST endpoints (included under "api/" from concord/urls.py)."""

from django.urls import path

from exports import apis

urlpatterns = [
    path("projects/<slug:slug>/releases/", apis.ReleaseListApi.as_view(), name="api_releases"),
    path("projects/<slug:slug>/releases/<int:number>/", apis.ReleaseDetailApi.as_view(), name="api_release"),
    path(
        "projects/<slug:slug>/releases/<int:number>/manifest",
        apis.ReleaseManifestApi.as_view(),
        name="api_release_manifest",
    ),
    path(
        "projects/<slug:slug>/releases/<int:number>/archive",
        apis.ReleaseArchiveApi.as_view(),
        name="api_release_archive",
    ),
    path(
        "projects/<slug:slug>/releases/<int:number>/records",
        apis.ReleaseRecordsApi.as_view(),
        name="api_release_records",
    ),
    path(
        "projects/<slug:slug>/releases/<int:number>/files/<path:name>",
        apis.ReleaseFileApi.as_view(),
        name="api_release_file",
    ),
    path(
        "projects/<slug:slug>/releases/<int:number>/diff/<int:other>/",
        apis.ReleaseDiffApi.as_view(),
        name="api_release_diff",
    ),
    path("projects/<slug:slug>/exports/", apis.ExportJobStartApi.as_view(), name="api_export_start"),
    path("projects/<slug:slug>/exports/<int:job_id>/", apis.ExportJobApi.as_view(), name="api_export_job"),
]
