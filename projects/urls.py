from django.urls import path

from projects import apis, views

urlpatterns = [
    path("", views.home, name="home"),
    path("p/<slug:slug>/", views.project_detail, name="project_detail"),
    path("p/<slug:slug>/import/", views.import_page, name="import_page"),
    path("p/<slug:slug>/import/<int:job_id>/", views.import_job_partial, name="import_job_partial"),
]

api_urlpatterns = [
    path("projects/", apis.ProjectListApi.as_view(), name="api_projects"),
    path("projects/<slug:slug>/", apis.ProjectDetailApi.as_view(), name="api_project"),
    path("projects/<slug:slug>/imports/", apis.ImportStartApi.as_view(), name="api_import_start"),
    path("projects/<slug:slug>/imports/<int:job_id>/", apis.ImportJobApi.as_view(), name="api_import_job"),
]
