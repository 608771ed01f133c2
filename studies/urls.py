"""Included once from concord/urls.py: the pages under p/<slug>/studies/ and, under api/, the REST endpoints."""

from django.urls import include, path

from studies import apis, views

api_urlpatterns = [
    path("projects/<slug:slug>/studies/", apis.StudyListCreateApi.as_view(), name="api_studies"),
    path("projects/<slug:slug>/studies/<int:study_id>/", apis.StudyStatusApi.as_view(), name="api_study"),
    path(
        "projects/<slug:slug>/studies/<int:study_id>/confirm/", apis.StudyConfirmApi.as_view(), name="api_study_confirm"
    ),
    path("projects/<slug:slug>/studies/<int:study_id>/report/", apis.StudyReportApi.as_view(), name="api_study_report"),
    path(
        "projects/<slug:slug>/studies/<int:study_id>/reexplanations/next/",
        apis.ReexplanationNextApi.as_view(),
        name="api_study_reexplain_next",
    ),
    path(
        "projects/<slug:slug>/studies/<int:study_id>/reexplanations/<int:reexplanation_id>/",
        apis.ReexplanationApi.as_view(),
        name="api_study_reexplanation",
    ),
]

S = "p/<slug:slug>/studies/<int:study_id>/"
urlpatterns = [
    path("p/<slug:slug>/studies/", views.studies_home, name="studies_home"),
    path("p/<slug:slug>/studies/new", views.study_new, name="study_new"),
    path(S, views.study_page, name="study_page"),
    path(S + "<slug:action>", views.study_action, name="study_action"),
    path(S + "items/<int:study_item_id>/image", views.study_item_image, name="study_item_image"),
    path(S + "items/<int:study_item_id>/<slug:action>", views.study_item_action, name="study_item_action"),
    path(S + "reexplain/next", views.reexplain_next, name="study_reexplain_next"),
    path(S + "reexplain/<int:reexplanation_id>/", views.reexplain_page, name="study_reexplain"),
    path(S + "reexplain/<int:reexplanation_id>/image", views.reexplain_image, name="study_reexplain_image"),
    path(S + "judge/next", views.judge_next, name="study_judge_next"),
    path(S + "judge/<int:reexplanation_id>/", views.judge_page, name="study_judge"),
    path(S + "adjudicate/next", views.adjudicate_next, name="study_adjudicate_next"),
    path(S + "adjudicate/<int:study_item_id>/", views.adjudicate_page, name="study_adjudicate"),
    path("api/", include(api_urlpatterns)),
]
