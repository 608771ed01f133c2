"""REST endpoints: providers, candidate jobs and their progress (leads), an item's candidates.

One APIView per operation, each with its own input/output serializers (CONVENTIONS).
"""
from __future__ import annotations

import os

from django.core.exceptions import ValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from candidates.access import annotator_item_check, job_get_for_project
from candidates.models import Provider
from candidates.selectors import candidates_for_annotator, candidates_with_identity, job_progress, providers_for_project
from candidates.services import candidate_job_start
from projects.access import item_get_for_user, project_get_for_user, roles_of
from projects.models import Role


class ProviderOutput(serializers.ModelSerializer):
    api_key_set = serializers.SerializerMethodField(
        help_text="Whether the named environment variable is set in the web server's environment."
    )

    class Meta:
        model = Provider
        fields = [
            "id", "name", "kind", "model", "base_url", "api_key_env", "api_key_set", "requests_per_minute",
            "timeout_seconds", "enabled",
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
    provider_name = serializers.CharField()
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    failed = serializers.IntegerField()
    pending = serializers.IntegerField(help_text="Queued or waiting for a retry / rate-limit slot.")
    running = serializers.IntegerField(help_text="Currently calling the provider.")


class CandidateJobOutput(serializers.Serializer):
    id = serializers.IntegerField(source="job.pk")
    status = serializers.CharField(source="job.status", help_text="running or done")
    prompt_version = serializers.CharField(source="job.prompt_version")
    created_at = serializers.DateTimeField(source="job.created_at")
    finished_at = serializers.DateTimeField(source="job.finished_at", allow_null=True)
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    failed = serializers.IntegerField()
    pending = serializers.IntegerField()
    providers = ProviderProgressOutput(many=True)


class CandidateJobStartInput(serializers.Serializer):
    item_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, allow_empty=False, max_length=100_000,
        help_text="Items to generate candidates for; omit for every item in stage 'new'.",
    )


class CandidateJobStartApi(APIView):
    @extend_schema(
        summary="Start generating candidates (leads)", request=CandidateJobStartInput,
        responses={202: CandidateJobOutput, 400: OpenApiResponse(description="No enabled provider / unknown items")},
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        data = CandidateJobStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            job = candidate_job_start(project=project, user=request.user, item_ids=data.validated_data.get("item_ids"))
        except ValidationError as exc:
            return Response({"detail": " ".join(exc.messages)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(CandidateJobOutput(job_progress(job=job)).data, status=status.HTTP_202_ACCEPTED)


class CandidateJobApi(APIView):
    @extend_schema(summary="Progress of a candidate job (leads)", responses=CandidateJobOutput)
    def get(self, request, slug, job_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        job = job_get_for_project(project=project, job_id=job_id)
        return Response(CandidateJobOutput(job_progress(job=job)).data)


class AnonymousCandidateOutput(serializers.Serializer):
    letter = serializers.CharField(help_text="A, B, C, ... in an order fixed per item and annotator.")
    fields = serializers.DictField(help_text="Normalized schema fields.")


class IdentifiedCandidateOutput(serializers.Serializer):
    id = serializers.IntegerField()
    provider_name = serializers.CharField()
    provider_kind = serializers.CharField()
    model_name = serializers.CharField()
    prompt_version = serializers.CharField()
    fields = serializers.DictField()
    removed = serializers.ListField(child=serializers.DictField())
    raw_reply = serializers.CharField()
    think = serializers.CharField()
    latency_ms = serializers.IntegerField(allow_null=True)
    prompt_tokens = serializers.IntegerField(allow_null=True)
    completion_tokens = serializers.IntegerField(allow_null=True)


class ItemCandidatesOutput(serializers.Serializer):
    anonymous = serializers.BooleanField(help_text="True when the caller sees the annotator's anonymized view.")
    candidates = serializers.ListField(child=serializers.DictField())


class ItemCandidatesApi(APIView):
    """Leads and researchers get identities; annotators get "Candidate A/B/C" with fields only."""

    @extend_schema(summary="An item's candidates (identified for leads/researchers, anonymized for annotators)",
                   responses=ItemCandidatesOutput)
    def get(self, request, slug, item_id):
        project = project_get_for_user(
            user=request.user, slug=slug, roles=[Role.LEAD, Role.RESEARCHER, Role.ANNOTATOR]
        )
        item = item_get_for_user(user=request.user, project=project, item_id=item_id)
        if roles_of(user=request.user, project=project) & {Role.LEAD, Role.RESEARCHER}:
            rows = IdentifiedCandidateOutput(candidates_with_identity(item=item), many=True).data
            return Response({"anonymous": False, "candidates": rows})
        annotator_item_check(user=request.user, item=item)
        rows = AnonymousCandidateOutput(candidates_for_annotator(item=item, user=request.user), many=True).data
        return Response({"anonymous": True, "candidates": rows})
