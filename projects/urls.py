from django.urls import path

from projects import apis, views

urlpatterns = [
    path("", views.home, name="home"),
    path("projects/new/", views.project_create_page, name="project_create"),
    path("staff/project-creators/", views.staff_creators_page, name="staff_creators"),
    path("invite/<str:token>/", views.invitation_page, name="invitation"),
    path("p/<slug:slug>/", views.project_detail, name="project_detail"),
    path("p/<slug:slug>/guideline/", views.guideline_page, name="guideline_page"),
    path("p/<slug:slug>/guideline/preview", views.guideline_preview, name="guideline_preview"),
    path("p/<slug:slug>/guideline/v<int:version>/", views.guideline_version_page, name="guideline_version"),
    path("p/<slug:slug>/import/", views.import_page, name="import_page"),
    path("p/<slug:slug>/import/ocr", views.ocr_start, name="ocr_start"),
    path("p/<slug:slug>/import/variant", views.variant_upload, name="variant_upload"),
    path("p/<slug:slug>/jobs/<slug:kind>/<int:job_id>/", views.job_partial, name="job_partial"),
    path("p/<slug:slug>/jobs/<slug:kind>/<int:job_id>/cancel", views.job_cancel_view, name="job_cancel"),
]

api_urlpatterns = [
    path("projects/", apis.ProjectListApi.as_view(), name="api_projects"),
    path("projects/<slug:slug>/", apis.ProjectDetailApi.as_view(), name="api_project"),
    path("projects/<slug:slug>/guideline/", apis.GuidelineApi.as_view(), name="api_guideline"),
    path("invitations/accept", apis.InvitationAcceptApi.as_view(), name="api_invitation_accept"),
    path("staff/project-creators", apis.ProjectCreatorApi.as_view(), name="api_project_creators"),
    path("projects/<slug:slug>/imports/", apis.ImportStartApi.as_view(), name="api_import_start"),
    path("projects/<slug:slug>/ocr/", apis.OcrApi.as_view(), name="api_ocr"),
    path(
        "projects/<slug:slug>/items/<int:item_id>/variants/<slug:kind>",
        apis.ItemVariantApi.as_view(),
        name="api_item_variant",
    ),
    path("projects/<slug:slug>/imports/<int:job_id>/", apis.ImportJobApi.as_view(), name="api_import_job"),
    path("projects/<slug:slug>/jobs/<slug:kind>/<int:job_id>/", apis.JobApi.as_view(), name="api_job"),
    path(
        "projects/<slug:slug>/jobs/<slug:kind>/<int:job_id>/cancel", apis.JobCancelApi.as_view(), name="api_job_cancel"
    ),
]
