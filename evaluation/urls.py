"""HTML pages (included at "" from concord/urls.py). The REST endpoints are in evaluation/api_urls.py."""

from django.urls import path

from evaluation import views

urlpatterns = [
    path("p/<slug:slug>/releases/v<int:number>/leaderboard/", views.leaderboard_page, name="evaluation_leaderboard"),
    path(
        "p/<slug:slug>/releases/v<int:number>/leaderboard/submit/",
        views.submission_create_view,
        name="evaluation_submit",
    ),
    path("p/<slug:slug>/releases/v<int:number>/leaderboard/run/", views.provider_run_view, name="evaluation_run"),
    path("p/<slug:slug>/releases/v<int:number>/leaderboard/judge/", views.judge_run_view, name="evaluation_judge"),
    path(
        "p/<slug:slug>/releases/v<int:number>/submissions/<int:submission_id>/predictions.jsonl",
        views.judged_predictions_view,
        name="evaluation_predictions",
    ),
    path(
        "p/<slug:slug>/releases/v<int:number>/submissions/<int:submission_id>/calibration/",
        views.calibration_upload_view,
        name="evaluation_calibration",
    ),
    path("p/<slug:slug>/releases/v<int:number>/leaderboard/compare/", views.compare_page, name="evaluation_compare"),
    path(
        "p/<slug:slug>/releases/v<int:number>/submissions/<int:submission_id>/",
        views.submission_page,
        name="evaluation_submission",
    ),
]
