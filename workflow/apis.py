"""The submit endpoint of the annotation workspace: it spans annotation and adjudication
(workflow.services.annotation_submit), so it lives here, above both."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from annotation.apis import OwnAnnotationApi, SaveInput, SaveOutput, save_output
from annotation.models import Kind
from core.apis import ErrorOutput
from projects.workflow import FLAG_REASONS
from workflow.services import annotation_submit, item_flag


class AnnotationSubmitApi(OwnAnnotationApi):
    """Validate and submit; 400 with per-field errors, 409 when stale, taken or closed."""

    @extend_schema(
        request=SaveInput,
        responses={200: SaveOutput, 400: ErrorOutput, 403: ErrorOutput, 404: ErrorOutput, 409: ErrorOutput},
    )
    def post(self, request, slug, item_id, kind=Kind.ANNOTATION):
        self.kind = kind
        annotation = self._annotation(request, slug, item_id)
        data = SaveInput(data=request.data)
        data.is_valid(raise_exception=True)
        result = annotation_submit(annotator=request.user, item=annotation.item, kind=kind, **data.validated_data)
        return Response(SaveOutput(save_output(result)).data)


class FlagInput(serializers.Serializer):
    reason = serializers.ChoiceField(choices=sorted(FLAG_REASONS), help_text="One the item's stage offers.")
    note = serializers.CharField(required=False, allow_blank=True, max_length=300, default="")


class AnnotationFlagApi(OwnAnnotationApi):
    """Flag the item you hold: it leaves the dataset with the reason (MemeCap's exclusions)."""

    @extend_schema(
        request=FlagInput,
        responses={
            200: inline_serializer("FlagOutput", {"status": serializers.CharField()}),
            400: ErrorOutput,
            404: ErrorOutput,
            409: ErrorOutput,
        },
    )
    def post(self, request, slug, item_id):
        annotation = self._annotation(request, slug, item_id)
        data = FlagInput(data=request.data)
        data.is_valid(raise_exception=True)
        item_flag(annotator=request.user, item=annotation.item, **data.validated_data)
        return Response({"status": "excluded"})
