"""REST API for researchers and leads: releases, files (ETag + Range), records by split, diffs,
export jobs. Researchers and leads read releases; only leads start builds; a project the caller
is not a member of answers 404 (projects.access)."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from core.apis import ErrorOutput, JobOutput
from exports.archive import archive_name
from exports.models import Release
from exports.ranges import ranged_file_response, ranged_response
from exports.selectors import (
    export_job_get_for_project,
    release_archive_layout,
    release_diff,
    release_file_get,
    release_files,
    release_get_for_project,
    release_records,
    releases_for_project,
)
from exports.services import export_job_start, release_archive_prepare
from exports.splitting import SPLITS
from exports.views import LEAD, RELEASE_READERS
from projects.access import project_get_for_user

CONTENT_TYPES = {
    "jsonl": "application/x-ndjson",
    "json": "application/json",
    "parquet": "application/vnd.apache.parquet",
    "md": "text/markdown; charset=utf-8",
    "jpg": "image/jpeg",
    "png": "image/png",
    "gif": "image/gif",
    "webp": "image/webp",
}


class AnyMediaRenderer(BaseRenderer):
    """Lets file endpoints answer any Accept header (their bodies are files, not rendered data);
    errors raised before the file is chosen still come out as JSON."""

    media_type = "*/*"
    format = "file"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return JSONRenderer().render(data, "application/json", renderer_context)


class ReleaseFileOutput(serializers.Serializer):
    name = serializers.CharField()
    sha256 = serializers.CharField()
    bytes = serializers.IntegerField()
    url = serializers.CharField(help_text="Download URL (supports ETag / If-None-Match and Range).")


class ReleaseOutput(serializers.ModelSerializer):
    version = serializers.CharField(source="label")
    url = serializers.SerializerMethodField()

    class Meta:
        model = Release
        fields = ["number", "version", "created_at", "record_count", "manifest_sha256", "url"]

    def get_url(self, obj) -> str:
        return reverse("api_release", args=[obj.project.slug, obj.number])


class ReleaseDetailOutput(ReleaseOutput):
    files = serializers.SerializerMethodField()
    manifest = serializers.JSONField()
    archive = serializers.SerializerMethodField(help_text="The whole release as one zip: url, sha256, bytes.")

    class Meta(ReleaseOutput.Meta):
        fields = [*ReleaseOutput.Meta.fields, "files", "manifest", "archive"]

    def get_archive(self, obj) -> dict:
        return {
            "url": reverse("api_release_archive", args=[obj.project.slug, obj.number]),
            "name": archive_name(obj.project.slug, obj.number) + ".zip",
            "sha256": obj.archive_sha256 or None,
            "bytes": obj.archive_bytes or None,
        }

    def get_files(self, obj) -> list[dict]:
        return [
            {**f, "url": reverse("api_release_file", args=[obj.project.slug, obj.number, f["name"]])}
            for f in release_files(obj)
        ]


class ReleaseListApi(ListAPIView):
    serializer_class = ReleaseOutput

    def get_queryset(self):
        project = project_get_for_user(user=self.request.user, slug=self.kwargs["slug"], roles=RELEASE_READERS)
        return releases_for_project(project=project).select_related("project")


class ReleaseDetailApi(APIView):
    @extend_schema(responses=ReleaseDetailOutput)
    def get(self, request, slug, number):
        project = project_get_for_user(user=request.user, slug=slug, roles=RELEASE_READERS)
        release = release_get_for_project(project=project, number=number)
        return Response(ReleaseDetailOutput(release).data)


def _file_response(request, release: Release, name: str):
    f = release_file_get(release=release, name=name)
    ext = name.rsplit(".", 1)[-1]
    filename = f"{release.project.slug}-v{release.number}-{name.replace('/', '-')}"
    return ranged_file_response(
        request,
        f.path,
        sha256=f.sha256,
        filename=filename,
        content_type=CONTENT_TYPES.get(ext, "application/octet-stream"),
    )


FILE_RESPONSES = {
    200: OpenApiResponse(OpenApiTypes.BINARY, description="The whole file; ETag is its sha256."),
    206: OpenApiResponse(OpenApiTypes.BINARY, description="One byte range (Range: bytes=start-end)."),
    304: OpenApiResponse(description="If-None-Match matched the ETag."),
    416: OpenApiResponse(description="The range starts past the end of the file."),
}


class ReleaseFileApi(APIView):
    renderer_classes = [JSONRenderer, AnyMediaRenderer]

    @extend_schema(responses=FILE_RESPONSES)
    def get(self, request, slug, number, name):
        project = project_get_for_user(user=request.user, slug=slug, roles=RELEASE_READERS)
        return _file_response(request, release_get_for_project(project=project, number=number), name)


class ReleaseManifestApi(APIView):
    renderer_classes = [JSONRenderer, AnyMediaRenderer]

    @extend_schema(responses=FILE_RESPONSES)
    def get(self, request, slug, number):
        project = project_get_for_user(user=request.user, slug=slug, roles=RELEASE_READERS)
        return _file_response(request, release_get_for_project(project=project, number=number), "manifest.json")


class ReleaseArchiveApi(APIView):
    """The whole release as one stored zip (records, annotations, candidates, reports, card,
    Croissant, redistributable images), streamed from the files: ETag = the archive's sha256
    (``archive_sha256`` of the release), Range for resumable downloads."""

    renderer_classes = [JSONRenderer, AnyMediaRenderer]

    @extend_schema(responses=FILE_RESPONSES)
    def get(self, request, slug, number):
        project = project_get_for_user(user=request.user, slug=slug, roles=RELEASE_READERS)
        release = release_archive_prepare(release=release_get_for_project(project=project, number=number))
        layout = release_archive_layout(release)

        def whole():
            return StreamingHttpResponse(layout.read(), content_type="application/zip")

        return ranged_response(
            request,
            size=layout.size,
            sha256=release.archive_sha256,
            content_type="application/zip",
            filename=archive_name(project.slug, release.number) + ".zip",
            whole=whole,
            part=lambda start, length: layout.read(start, length),
        )


class RecordsQueryInput(serializers.Serializer):
    split = serializers.ChoiceField(
        choices=SPLITS, required=False, help_text="Only this split's records (default: all records)."
    )


class ReleaseRecordsApi(APIView):
    renderer_classes = [JSONRenderer, AnyMediaRenderer]

    @extend_schema(
        parameters=[OpenApiParameter("split", str, enum=list(SPLITS), required=False)],
        responses={200: OpenApiResponse(OpenApiTypes.BINARY, description="JSONL, one gold record per line.")},
    )
    def get(self, request, slug, number):
        project = project_get_for_user(user=request.user, slug=slug, roles=RELEASE_READERS)
        query = RecordsQueryInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        release = release_get_for_project(project=project, number=number)
        split = query.validated_data.get("split")
        response = StreamingHttpResponse(release_records(release, split=split), content_type=CONTENT_TYPES["jsonl"])
        name = f"{project.slug}-v{release.number}-records{'-' + split if split else ''}.jsonl"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        response["X-Content-Type-Options"] = "nosniff"
        return response


class DiffChangeOutput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["added", "removed", "changed"])
    item_id = serializers.IntegerField()
    source_id = serializers.CharField()
    fields = serializers.ListField(child=serializers.CharField(), required=False)


class ReleaseDiffOutput(serializers.Serializer):
    identical = serializers.BooleanField(help_text="Same manifest sha256: byte-identical files.")
    counts = serializers.DictField(child=serializers.IntegerField())
    changed_fields = serializers.DictField(child=serializers.IntegerField())
    changes = DiffChangeOutput(many=True)
    truncated = serializers.BooleanField()

    def to_representation(self, instance):
        data = super().to_representation(instance)
        return {"from": instance["from"], "to": instance["to"], **data}


class ReleaseDiffApi(APIView):
    @extend_schema(responses=ReleaseDiffOutput)
    def get(self, request, slug, number, other):
        project = project_get_for_user(user=request.user, slug=slug, roles=RELEASE_READERS)
        old = release_get_for_project(project=project, number=number)
        new = release_get_for_project(project=project, number=other)
        return Response(ReleaseDiffOutput(release_diff(old=old, new=new, limit=5000)).data)


class ExportJobOutput(JobOutput):
    release = serializers.SerializerMethodField(help_text="Number of the published release, once done.")

    def get_release(self, obj) -> int | None:
        return obj.release.number if obj.release_id else None


class ExportJobStartApi(APIView):
    @extend_schema(request=None, responses={202: ExportJobOutput, 400: ErrorOutput, 409: ErrorOutput})
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
        job = export_job_start(project=project, user=request.user)
        return Response(ExportJobOutput(job).data, status=status.HTTP_202_ACCEPTED)


class ExportJobApi(APIView):
    @extend_schema(responses={200: ExportJobOutput, 404: ErrorOutput})
    def get(self, request, slug, job_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
        return Response(ExportJobOutput(export_job_get_for_project(project=project, job_id=job_id)).data)
