from __future__ import annotations

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from projects.access import project_get_for_user, projects_for_user
from projects.models import ImportJob, Project, Role
from projects.services import import_job_create, upload_save


class ProjectOutput(serializers.ModelSerializer):
    class Meta:
        model = Project
        fields = ["slug", "name", "preset", "schema_version", "annotators_per_item", "created_at"]


class ProjectDetailOutput(ProjectOutput):
    roles = serializers.SerializerMethodField()

    class Meta(ProjectOutput.Meta):
        fields = [*ProjectOutput.Meta.fields, "schema", "roles"]

    def get_roles(self, obj) -> list[str]:
        return sorted(obj.user_roles)


class ProjectListApi(ListAPIView):
    serializer_class = ProjectOutput

    def get_queryset(self):
        return projects_for_user(user=self.request.user).order_by("name")


class ProjectDetailApi(APIView):
    @extend_schema(responses=ProjectDetailOutput)
    def get(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug)
        return Response(ProjectDetailOutput(project).data)


class ImportJobOutput(serializers.ModelSerializer):
    class Meta:
        model = ImportJob
        fields = [
            "id", "source_name", "status", "created_at", "finished_at", "rows_total", "rows_done",
            "imported", "already_present", "exact_duplicates", "errors", "message",
        ]


class ImportStartInput(serializers.Serializer):
    file = serializers.FileField(help_text="zip with images and manifest.jsonl / manifest.csv")

    def validate_file(self, f):
        if not f.name.lower().endswith(".zip"):
            raise serializers.ValidationError("upload a .zip file holding the images and a manifest")
        return f


class ImportStartApi(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(request=ImportStartInput, responses={202: ImportJobOutput})
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        data = ImportStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        try:
            path = upload_save(uploaded_file=upload)
        except ValueError as exc:
            raise serializers.ValidationError({"file": [str(exc)]}) from exc
        from projects.tasks import import_job_task

        with transaction.atomic():
            job = import_job_create(project=project, user=request.user, source_name=upload.name, upload_path=path)
            transaction.on_commit(lambda: import_job_task.delay(job.pk))
        return Response(ImportJobOutput(job).data, status=status.HTTP_202_ACCEPTED)


class ImportJobApi(APIView):
    @extend_schema(responses=ImportJobOutput)
    def get(self, request, slug, job_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        job = ImportJob.objects.filter(project=project, pk=job_id).first()
        if job is None:
            return Response({"detail": "No such import job."}, status=status.HTTP_404_NOT_FOUND)
        return Response(ImportJobOutput(job).data)
