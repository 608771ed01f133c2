"""REST API of evaluation: submit predictions, read a release split's leaderboard (JSON, CSV),
one submission, and the paired comparison of two.

Leads and researchers only (model identities are in every answer); a project the caller is not
a member of answers 404, another role 403 (projects.access).
"""

from __future__ import annotations

import csv
import io
import json

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from core.apis import ErrorOutput
from core.errors import Invalid
from evaluation.calibration import calibration_create
from evaluation.judge_runs import judge_run_start
from evaluation.models import CalibrationSet
from evaluation.selectors import (
    LEADS,
    READERS,
    SUBMITTERS,
    judged_predictions_lines,
    leaderboard,
    release_get_for_evaluation,
    release_splits,
    split_check,
    submission_compare,
    submission_get,
)
from evaluation.services import FORMATS, candidate_submissions_enter, submission_create
from projects.access import project_get_for_user

REFUSALS = {
    400: ErrorOutput,
    401: ErrorOutput,
    403: ErrorOutput,
    404: ErrorOutput,
}
SPLIT_PARAM = OpenApiParameter("split", str, description="Split of the release (default test).")


class EvaluationFigureOutput(serializers.Serializer):
    label = serializers.CharField()
    value = serializers.FloatField(allow_null=True, help_text="Fraction in [0, 1]; None when undefined.")
    n = serializers.IntegerField(help_text="Items the figure is computed over.")
    ci = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="Percentile bootstrap 95% CI [low, high]."
    )


class SubmissionOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    model_name = serializers.CharField()
    description = serializers.CharField()
    url = serializers.CharField()
    source = serializers.CharField(help_text="upload / replies / candidates / provider")
    split = serializers.CharField()
    release = serializers.IntegerField(source="release.number")
    created_at = serializers.DateTimeField()
    figures = serializers.SerializerMethodField()
    breakdowns = serializers.SerializerMethodField()
    report = serializers.JSONField(
        help_text="counts (matched, missing, extra, duplicate, ...), malformed_fields, problems"
    )
    predictions_sha256 = serializers.CharField()

    @extend_schema_field(serializers.DictField(child=EvaluationFigureOutput()))
    def get_figures(self, obj) -> dict:
        return (obj.scores or {}).get("figures") or {}

    def get_breakdowns(self, obj) -> dict:
        return (obj.scores or {}).get("breakdowns") or {}


class LeaderboardRowOutput(serializers.Serializer):
    id = serializers.IntegerField()
    rank = serializers.IntegerField()
    model_name = serializers.CharField()
    source = serializers.CharField()
    missing = serializers.IntegerField()
    malformed = serializers.IntegerField()
    figures = serializers.DictField(child=EvaluationFigureOutput())


class JudgeBoardOutput(serializers.Serializer):
    slot = serializers.IntegerField()
    columns = serializers.ListField(child=serializers.DictField())
    rows = serializers.ListField(child=serializers.DictField(), help_text="[{id, model_name, judge, cells}]")


class LeaderboardOutput(serializers.Serializer):
    release = serializers.IntegerField()
    split = serializers.CharField()
    n_items = serializers.IntegerField()
    primary = serializers.CharField(allow_null=True, help_text="The ranking figure of the preset.")
    sort = serializers.CharField()
    columns = serializers.ListField(child=serializers.DictField(), help_text="[{key, label}] in the paper's order")
    rows = LeaderboardRowOutput(many=True)
    judged = serializers.BooleanField(help_text="True for a release scored by two LLM judges (VIKR).")
    judge_boards = JudgeBoardOutput(many=True, help_text="Each judge's own figures (VIKR).")
    judge_agreement = serializers.JSONField(
        allow_null=True, help_text="Spearman's rho between the single-judge boards per figure (VIKR)."
    )


class SubmitInput(serializers.Serializer):
    file = serializers.FileField(help_text="JSONL: one object per item (item_id or source_id, schema fields).")
    model_name = serializers.CharField(max_length=120)
    split = serializers.CharField(required=False, default="", help_text="Default: test (else the first split).")
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)
    url = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)
    format = serializers.ChoiceField(
        choices=FORMATS, required=False, default="jsonl", help_text='"replies": objects with a raw "reply" string.'
    )


class CompareRowOutput(serializers.Serializer):
    key = serializers.CharField()
    label = serializers.CharField()
    difference = serializers.FloatField(allow_null=True, help_text="a - b")
    ci = serializers.ListField(child=serializers.FloatField(), allow_null=True, help_text="Paired bootstrap 95% CI.")
    n = serializers.IntegerField()


def _board(request, slug, number) -> tuple[dict, object, str]:
    project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
    release = release_get_for_evaluation(project=project, number=number)
    splits = release_splits(release)
    split = split_check(release, request.query_params.get("split") or ("test" if "test" in splits else splits[0]))
    candidate_submissions_enter(release=release, split=split)
    sort = request.query_params.get("sort")
    board = leaderboard(release=release, split=split, sort=sort, descending=request.query_params.get("dir") != "asc")
    return board, release, split


def _rows(board: dict) -> list[dict]:
    return [
        {
            "id": r["id"],
            "rank": i,
            "model_name": r["model_name"],
            "source": r["source"],
            "missing": r["missing"],
            "malformed": r["malformed"],
            "figures": r["figures"],
        }
        for i, r in enumerate(board["rows"], start=1)
    ]


class EvaluationsApi(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        parameters=[SPLIT_PARAM, OpenApiParameter("sort", str), OpenApiParameter("dir", str, enum=["asc", "desc"])],
        responses={200: LeaderboardOutput, **REFUSALS},
        summary="Leaderboard of a release split (hidden candidate models included)",
    )
    def get(self, request, slug, number):
        board, release, split = _board(request, slug, number)
        return Response(
            LeaderboardOutput(
                {
                    "release": release.number,
                    "split": split,
                    "n_items": board["n_items"],
                    "primary": board["primary"],
                    "sort": board["sort"],
                    "columns": board["columns"],
                    "rows": _rows(board),
                    "judged": board["judged"],
                    "judge_boards": board["judge_boards"],
                    "judge_agreement": board["judge_agreement"],
                }
            ).data
        )

    @extend_schema(
        request={"multipart/form-data": SubmitInput},
        responses={201: SubmissionOutput, **REFUSALS, 413: ErrorOutput, 415: ErrorOutput},
        summary="Submit a model's predictions (JSONL or raw replies) for scoring",
    )
    def post(self, request, slug, number):
        project = project_get_for_user(user=request.user, slug=slug, roles=SUBMITTERS)
        release = release_get_for_evaluation(project=project, number=number)
        data = SubmitInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        submission = submission_create(
            user=request.user,
            release=release,
            split=v["split"] or None,
            model_name=v["model_name"],
            description=v["description"],
            url=v["url"],
            file=v["file"],
            fmt=v["format"],
        )
        return Response(SubmissionOutput(submission).data, status=status.HTTP_201_CREATED)


class LeaderboardCsvApi(APIView):
    @extend_schema(
        parameters=[SPLIT_PARAM],
        responses={200: OpenApiResponse(OpenApiTypes.STR, description="CSV: one row per submission"), **REFUSALS},
        summary="Leaderboard of a release split as CSV (value, CI low, CI high, n per figure)",
    )
    def get(self, request, slug, number):
        board, release, split = _board(request, slug, number)
        out = io.StringIO()
        writer = csv.writer(out)
        header = ["rank", "id", "model_name", "source", "missing", "malformed"]
        for c in board["columns"]:
            header += [c["key"], f"{c['key']}.ci_low", f"{c['key']}.ci_high", f"{c['key']}.n"]
        writer.writerow(header)
        for rank, r in enumerate(board["rows"], start=1):
            row = [rank, r["id"], _csv_safe(r["model_name"]), r["source"], r["missing"], r["malformed"]]
            for cell in r["cells"]:
                ci = cell.get("ci") or [None, None]
                row += [_num(cell.get("value")), _num(ci[0]), _num(ci[1]), cell.get("n", 0)]
            writer.writerow(row)
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{slug}-v{release.number}-{split}-leaderboard.csv"'
        return response


def _num(x) -> str:
    return "" if x is None else repr(float(x))


def _csv_safe(text: str) -> str:
    # A model name is user input: never let a spreadsheet read it as a formula.
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


class SubmissionApi(APIView):
    @extend_schema(
        responses={200: SubmissionOutput, **REFUSALS},
        summary="One submission's scores and report",
        operation_id="projects_releases_evaluation_submission_retrieve",
    )
    def get(self, request, slug, number, submission_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
        release = release_get_for_evaluation(project=project, number=number)
        return Response(SubmissionOutput(submission_get(release=release, submission_id=submission_id)).data)


class CompareApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("a", int, required=True), OpenApiParameter("b", int, required=True)],
        responses={200: CompareRowOutput(many=True), **REFUSALS},
        summary="Paired bootstrap CI of a - b per figure (same items, 10,000 resamples)",
    )
    def get(self, request, slug, number):
        project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
        release = release_get_for_evaluation(project=project, number=number)
        a = submission_get(release=release, submission_id=request.query_params.get("a"))
        b = submission_get(release=release, submission_id=request.query_params.get("b"))
        return Response(CompareRowOutput(submission_compare(a, b), many=True).data)


class JudgeInput(serializers.Serializer):
    judge_1 = serializers.IntegerField(help_text="Provider id of judge 1.")
    judge_2 = serializers.IntegerField(help_text="Provider id of judge 2 (another provider).")


class JudgeRunOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    status = serializers.CharField()
    submission = serializers.IntegerField(source="submission_id")
    judge_1 = serializers.IntegerField(source="judge_1_id")
    judge_2 = serializers.IntegerField(source="judge_2_id")


class JudgeApi(APIView):
    @extend_schema(
        request=JudgeInput,
        responses={202: JudgeRunOutput, **REFUSALS, 409: ErrorOutput},
        summary="Leads: two judge providers score a VIKR submission (a job; poll /jobs/judging/<id>/)",
    )
    def post(self, request, slug, number, submission_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=LEADS)
        release = release_get_for_evaluation(project=project, number=number)
        submission = submission_get(release=release, submission_id=submission_id)  # 404 before 400
        data = JudgeInput(data=request.data)
        data.is_valid(raise_exception=True)
        run = judge_run_start(
            user=request.user,
            submission=submission,
            judge_1_id=data.validated_data["judge_1"],
            judge_2_id=data.validated_data["judge_2"],
        )
        return Response(
            {
                "id": run.pk,
                "status": run.status,
                "submission": run.submission_id,
                "judge_1": run.judge_1_id,
                "judge_2": run.judge_2_id,
            },
            status=status.HTTP_202_ACCEPTED,
        )


class CalibrationInput(serializers.Serializer):
    file = serializers.FileField(help_text="CSV or JSONL human labels of two raters (evaluation.calibration).")
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=120)


class CalibrationOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    created_at = serializers.DateTimeField()
    report = serializers.JSONField(help_text="Kappas on Success (vs rater 1 and consensus, human-human), rho.")


class CalibrationApi(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        responses={200: CalibrationOutput(many=True), **REFUSALS}, summary="Calibration sets of a submission"
    )
    def get(self, request, slug, number, submission_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
        release = release_get_for_evaluation(project=project, number=number)
        sub = submission_get(release=release, submission_id=submission_id)
        return Response(CalibrationOutput(CalibrationSet.objects.filter(submission=sub), many=True).data)

    @extend_schema(
        request={"multipart/form-data": CalibrationInput},
        responses={201: CalibrationOutput, **REFUSALS},
        summary="Leads: upload two raters' human labels; the report compares them with the judges",
    )
    def post(self, request, slug, number, submission_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=LEADS)
        release = release_get_for_evaluation(project=project, number=number)
        sub = submission_get(release=release, submission_id=submission_id)
        data = CalibrationInput(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        if upload.size > 5 << 20:
            raise Invalid("The file was refused: it is larger than 5 MB.", errors={"file": "too large"})
        cal = calibration_create(
            user=request.user, submission=sub, data=upload.read(), name=data.validated_data["name"]
        )
        return Response(CalibrationOutput(cal).data, status=status.HTTP_201_CREATED)


class JudgedPredictionsApi(APIView):
    @extend_schema(
        responses={200: OpenApiResponse(OpenApiTypes.STR, description="JSONL"), **REFUSALS},
        summary="A submission's scored predictions (VIKR: with the judges' decisions; evaluate.py reproduces)",
    )
    def get(self, request, slug, number, submission_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
        release = release_get_for_evaluation(project=project, number=number)
        sub = submission_get(release=release, submission_id=submission_id)
        body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in judged_predictions_lines(sub))
        return HttpResponse(body.encode(), content_type="application/x-ndjson; charset=utf-8")
