"""REST endpoints: providers, candidate jobs and their progress (leads), an item's candidates.

One APIView per operation, each with its own input/output serializers (CONVENTIONS).
"""

from __future__ import annotations

import os

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from candidates.models import CandidateJob, Provider
from candidates.selectors import providers_for_project
from candidates.services import candidate_job_start
from core.apis import ErrorOutput, JobOutput
from projects.access import project_get_for_user
from projects.models import Role
from projects.selectors import job_get_for_project


class ProviderOutput(serializers.ModelSerializer):
    api_key_set = serializers.SerializerMethodField(
        help_text="Whether the named environment variable is set in the web server's environment."
    )

    class Meta:
        model = Provider
        fields = [
            "id",
            "name",
            "kind",
            "model",
            "base_url",
            "api_key_env",
            "api_key_set",
            "requests_per_minute",
            "timeout_seconds",
            "enabled",
        ]

    def get_api_key_set(self, obj) -> bool:
        return bool(obj.api_key_env and os.environ.get(obj.api_key_env))


class ProviderListApi(APIView):
    @extend_schema(summary="List the project's candidate providers (leads)", responses=ProviderOutput(many=True))
    def get(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        return Response(ProviderOutput(providers_for_project(project=project), many=True).data)


class ProviderProgressOutput(serializers.Serializer):
    provider_id = serializers.IntegerField()
    provider_name = serializers.CharField(source="provider__name")
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    failed = serializers.IntegerField()
    pending = serializers.IntegerField(help_text="Queued or waiting for a retry / rate-limit slot.")
    running = serializers.IntegerField(help_text="Currently calling the provider.")
    cancelled = serializers.IntegerField()


class CandidateJobOutput(JobOutput):
    prompt_version = serializers.CharField()
    total = serializers.IntegerField(source="totals.total")
    done = serializers.IntegerField(source="totals.done")
    failed = serializers.IntegerField(source="totals.failed")
    pending = serializers.SerializerMethodField(help_text="Queued, waiting for a slot or a retry, or running.")
    providers = ProviderProgressOutput(many=True, source="provider_progress")

    def get_pending(self, obj) -> int:
        t = obj.totals()
        return t["pending"] + t["running"]


class CandidateJobStartInput(serializers.Serializer):
    item_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**62),
        required=False,
        allow_empty=False,
        max_length=100_000,
        help_text="Items to generate candidates for; omit for every item in stage 'new'.",
    )


class CandidateJobStartApi(APIView):
    @extend_schema(
        summary="Start generating candidates (leads)",
        request=CandidateJobStartInput,
        responses={202: CandidateJobOutput, 400: ErrorOutput},
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        data = CandidateJobStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        job = candidate_job_start(project=project, user=request.user, item_ids=data.validated_data.get("item_ids"))
        return Response(CandidateJobOutput(job).data, status=status.HTTP_202_ACCEPTED)


class CandidateJobApi(APIView):
    @extend_schema(summary="Progress of a candidate job (leads)", responses={200: CandidateJobOutput, 404: ErrorOutput})
    def get(self, request, slug, job_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        job = job_get_for_project(user=request.user, project=project, kind=CandidateJob.kind, job_id=job_id)
        return Response(CandidateJobOutput(job).data)
