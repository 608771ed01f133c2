"""REST endpoints (included under "api/" from concord/urls.py)."""

from django.urls import path

from evaluation import apis

urlpatterns = [
    path(
        "projects/<slug:slug>/releases/<int:number>/evaluations/", apis.EvaluationsApi.as_view(), name="api_evaluations"
    ),
    path(
        "projects/<slug:slug>/releases/<int:number>/evaluations/leaderboard.csv",
        apis.LeaderboardCsvApi.as_view(),
        name="api_leaderboard_csv",
    ),
    path(
        "projects/<slug:slug>/releases/<int:number>/evaluations/compare/",
        apis.CompareApi.as_view(),
        name="api_evaluations_compare",
    ),
    path(
        "projects/<slug:slug>/releases/<int:number>/evaluations/<int:submission_id>/",
        apis.SubmissionApi.as_view(),
        name="api_evaluation",
    ),
    path(
        "projects/<slug:slug>/releases/<int:number>/evaluations/<int:submission_id>/judge/",
        apis.JudgeApi.as_view(),
        name="api_evaluation_judge",
    ),
    path(
        "projects/<slug:slug>/releases/<int:number>/evaluations/<int:submission_id>/calibration/",
        apis.CalibrationApi.as_view(),
        name="api_evaluation_calibration",
    ),
    path(
        "projects/<slug:slug>/releases/<int:number>/evaluations/<int:submission_id>/predictions.jsonl",
        apis.JudgedPredictionsApi.as_view(),
        name="api_evaluation_predictions",
    ),
]
