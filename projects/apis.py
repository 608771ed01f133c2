from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from core.apis import ErrorOutput, JobOutput
from core.errors import Invalid, NotFound
from core.jobs import job_cancel
from projects.access import item_get_for_user, project_get_for_user, projects_for_user
from projects.imports import import_job_start
from projects.members import invitation_accept
from projects.models import GuidelineVersion, ImportJob, ItemVariant, Project, Role
from projects.ocr import item_variant_upload, ocr_job_start
from projects.presets import PRESETS
from projects.selectors import job_get_for_project, ocr_overview
from projects.services import guideline_save, project_create_for_user, project_creator_set, user_can_create_projects


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


class ProjectCreateInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    slug = serializers.CharField(max_length=80, required=False, allow_blank=True, default="")
    preset = serializers.ChoiceField(choices=sorted(PRESETS), required=False, allow_blank=True, default="")
    copy_from = serializers.CharField(
        max_length=80, required=False, allow_blank=True, default="", help_text="Slug of a project you lead."
    )


class ProjectListApi(ListAPIView):
    """GET: the projects you are an active member of. POST: create a project (needs the "can
    create projects" permission, granted by site staff); you become its lead."""

    serializer_class = ProjectOutput

    def get_queryset(self):
        return projects_for_user(user=self.request.user).order_by("name")

    @extend_schema(request=ProjectCreateInput, responses={201: ProjectDetailOutput, 400: ErrorOutput, 403: ErrorOutput})
    def post(self, request):
        if not user_can_create_projects(request.user):  # refused before the body is read
            raise PermissionDenied("You may not create projects: ask the site staff for the permission.")
        data = ProjectCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        project = project_create_for_user(
            user=request.user, name=v["name"], slug=v["slug"], preset=v["preset"], copy_from_slug=v["copy_from"]
        )
        project = project_get_for_user(user=request.user, slug=project.slug)
        return Response(ProjectDetailOutput(project).data, status=status.HTTP_201_CREATED)


class GuidelineVersionOutput(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None)

    class Meta:
        model = GuidelineVersion
        fields = ["version", "text", "note", "created_by", "created_at"]


class GuidelineInput(serializers.Serializer):
    text = serializers.CharField(
        max_length=100_000, trim_whitespace=False, help_text="Markdown (raw HTML is shown as text)."
    )
    note = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")
    version = serializers.IntegerField(
        required=False, allow_null=True, default=None, help_text="The version you edited: another one -> 409."
    )


class GuidelineApi(APIView):
    """The guideline's versions, newest first (any member but researchers); POST a new version (leads)."""

    @extend_schema(responses={200: GuidelineVersionOutput(many=True), 403: ErrorOutput, 404: ErrorOutput})
    def get(self, request, slug):
        project = project_get_for_user(
            user=request.user, slug=slug, roles=[Role.LEAD, Role.ANNOTATOR, Role.REVIEWER, Role.AUDITOR]
        )
        rows = GuidelineVersion.objects.filter(project=project).select_related("created_by").order_by("-version")
        return Response(GuidelineVersionOutput(rows, many=True).data)

    @extend_schema(
        request=GuidelineInput,
        responses={201: GuidelineVersionOutput, 400: ErrorOutput, 403: ErrorOutput, 409: ErrorOutput},
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        data = GuidelineInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        row = guideline_save(
            project=project, text=v["text"], note=v["note"], user=request.user, expected_version=v["version"]
        )
        return Response(GuidelineVersionOutput(row).data, status=status.HTTP_201_CREATED)


class InvitationAcceptInput(serializers.Serializer):
    token = serializers.CharField(max_length=200)
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=200, trim_whitespace=False)
    password2 = serializers.CharField(max_length=200, trim_whitespace=False)


class InvitationAcceptApi(APIView):
    """The invitee creates their account with the one-time token of their link (no login needed)."""

    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(
        request=InvitationAcceptInput,
        responses={
            201: inline_serializer(
                "InvitationAccepted", {"username": serializers.CharField(), "project": serializers.CharField()}
            ),
            400: ErrorOutput,
            404: ErrorOutput,
        },
    )
    def post(self, request):
        data = InvitationAcceptInput(data=request.data)
        data.is_valid(raise_exception=True)
        user, project = invitation_accept(**data.validated_data)
        return Response({"username": user.username, "project": project.slug}, status=status.HTTP_201_CREATED)


class ProjectCreatorInput(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    allowed = serializers.BooleanField()


class ProjectCreatorApi(APIView):
    """Site staff grant or withdraw "can create projects"."""

    @extend_schema(
        request=ProjectCreatorInput,
        responses={
            200: inline_serializer(
                "ProjectCreator", {"username": serializers.CharField(), "allowed": serializers.BooleanField()}
            ),
            403: ErrorOutput,
            404: ErrorOutput,
        },
    )
    def post(self, request):
        if not request.user.is_staff:
            raise PermissionDenied("Only site staff decide who may create projects.")
        data = ProjectCreatorInput(data=request.data)
        data.is_valid(raise_exception=True)
        user = get_user_model().objects.filter(username=data.validated_data["username"], is_active=True).first()
        if user is None:
            raise NotFound("No such user.")
        project_creator_set(staff=request.user, user=user, allowed=data.validated_data["allowed"])
        return Response({"username": user.username, "allowed": data.validated_data["allowed"]})


class ProjectDetailApi(APIView):
    @extend_schema(responses=ProjectDetailOutput)
    def get(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug)
        return Response(ProjectDetailOutput(project).data)


class ImportJobOutput(JobOutput):
    source_name = serializers.CharField()
    imported = serializers.IntegerField()
    already_present = serializers.IntegerField()
    exact_duplicates = serializers.IntegerField()
    refused = serializers.IntegerField()
    errors = serializers.ListField(
        child=serializers.DictField(),
        help_text="The first problems of each kind: {row, kind, reason, source_id, image}.",
    )
    error_counts = serializers.DictField(child=serializers.IntegerField(), help_text="{kind: rows refused}.")


class ImportStartInput(serializers.Serializer):
    file = serializers.FileField(help_text="zip with images and manifest.jsonl / manifest.csv")


class ImportStartApi(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(request=ImportStartInput, responses={202: ImportJobOutput, 400: ErrorOutput, 413: ErrorOutput})
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        data = ImportStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        job = import_job_start(project=project, user=request.user, uploaded_file=data.validated_data["file"])
        return Response(ImportJobOutput(job).data, status=status.HTTP_202_ACCEPTED)


class ImportJobApi(APIView):
    @extend_schema(responses={200: ImportJobOutput, 404: ErrorOutput})
    def get(self, request, slug, job_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        job = job_get_for_project(user=request.user, project=project, kind=ImportJob.kind, job_id=job_id)
        return Response(ImportJobOutput(job).data)


class JobApi(APIView):
    """Any job of the project, in the one job representation (pending/running/done/failed/cancelled)."""

    @extend_schema(responses={200: JobOutput, 403: ErrorOutput, 404: ErrorOutput})
    def get(self, request, slug, kind, job_id):
        project = project_get_for_user(user=request.user, slug=slug)
        return Response(
            JobOutput(job_get_for_project(user=request.user, project=project, kind=kind, job_id=job_id)).data
        )


class JobCancelApi(APIView):
    """Cancel a job: a queued or stalled one ends at once, a running one at its next progress report."""

    @extend_schema(request=None, responses={200: JobOutput, 403: ErrorOutput, 404: ErrorOutput})
    def post(self, request, slug, kind, job_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        job = job_get_for_project(user=request.user, project=project, kind=kind, job_id=job_id)
        return Response(JobOutput(job_cancel(job)).data)


class OcrOverviewOutput(serializers.Serializer):
    wanted = serializers.BooleanField(help_text="The project reads its imports with OCR.")
    items = serializers.IntegerField()
    read = serializers.IntegerField()
    unreadable = serializers.IntegerField()
    texts_filled = serializers.IntegerField(help_text="Items whose text came from OCR.")
    variants = serializers.IntegerField(help_text="Items with a text-free variant.")
    uploaded = serializers.IntegerField(help_text="... of which uploaded by a lead.")


class OcrApi(APIView):
    """OCR of the project's images: GET the counts; POST queues a run over items without OCR."""

    @extend_schema(responses={200: OcrOverviewOutput, 403: ErrorOutput, 404: ErrorOutput})
    def get(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        return Response(OcrOverviewOutput(ocr_overview(project=project)).data)

    @extend_schema(request=None, responses={202: JobOutput, 403: ErrorOutput, 404: ErrorOutput})
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        return Response(JobOutput(ocr_job_start(project=project, user=request.user)).data, status=202)


class VariantInput(serializers.Serializer):
    file = serializers.FileField(help_text="The variant image, the same size as the item's image (50 MB at most).")


class VariantOutput(serializers.ModelSerializer):
    class Meta:
        model = ItemVariant
        fields = ["item", "kind", "source", "image_sha256", "width", "height", "created_at"]


class ItemVariantApi(APIView):
    """A lead's own text-free image of an item (replaces the one painted from the OCR boxes)."""

    parser_classes = [MultiPartParser]

    @extend_schema(request=VariantInput, responses={200: VariantOutput, 400: ErrorOutput, 403: ErrorOutput})
    def post(self, request, slug, item_id, kind):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        item = item_get_for_user(user=request.user, project=project, item_id=item_id)
        data = VariantInput(data=request.data)
        data.is_valid(raise_exception=True)
        f = data.validated_data["file"]
        if f.size > 50 * 1024 * 1024:
            raise Invalid("The file is larger than 50 MB.", errors={"file": "larger than 50 MB"})
        variant = item_variant_upload(item=item, kind=kind, data=f.read(), user=request.user)
        return Response(VariantOutput(variant).data)
