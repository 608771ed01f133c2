"""Included once from concord/urls.py: the lead pages and, under api/, the REST endpoints."""

from django.urls import include, path

from candidates import apis, views

api_urlpatterns = [
    path("projects/<slug:slug>/candidate-providers/", apis.ProviderListApi.as_view(), name="api_candidate_providers"),
    path("projects/<slug:slug>/candidate-jobs/", apis.CandidateJobStartApi.as_view(), name="api_candidate_job_start"),
    path("projects/<slug:slug>/candidate-jobs/<int:job_id>/", apis.CandidateJobApi.as_view(), name="api_candidate_job"),
]

urlpatterns = [
    path("p/<slug:slug>/candidates/", views.jobs_page, name="candidate_jobs"),
    path("p/<slug:slug>/candidates/skip/", views.skip_candidates, name="candidate_skip"),
    path("p/<slug:slug>/candidates/providers/", views.providers_page, name="candidate_providers"),
    path("p/<slug:slug>/candidates/providers/<int:provider_id>/", views.provider_edit, name="candidate_provider_edit"),
    path(
        "p/<slug:slug>/candidates/providers/<int:provider_id>/toggle/",
        views.provider_toggle,
        name="candidate_provider_toggle",
    ),
    path("p/<slug:slug>/candidates/jobs/<int:job_id>/", views.job_page, name="candidate_job"),
    path("p/<slug:slug>/candidates/jobs/<int:job_id>/retry/", views.job_retry, name="candidate_job_retry"),
    path("p/<slug:slug>/candidates/items/<int:item_id>/", views.item_candidates_page, name="candidate_item"),
    path("api/", include(api_urlpatterns)),
]
