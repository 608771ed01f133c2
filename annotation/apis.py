"""JSON API of the annotation workspace (autosave, submit, skip, next) — used by
static/annotation/workspace.js and usable with a REST token.

One APIView per operation with its own input and output serializers. The same views serve the
candidate-blind audit, with ``kind="audit"`` bound in the URL (auditor role required).
"""
from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Kind
from annotation.selectors import annotation_get_for_annotator, annotator_preference, workspace_for_annotator
from annotation.services import (
    SKIP_REASON_KEYS,
    AnnotationError,
    annotation_save_draft,
    annotation_skip,
    annotation_submit,
    assignment_claim_next,
)
from projects.access import project_get_for_user
from projects.models import Role

ROLE_FOR_KIND = {Kind.ANNOTATION: Role.ANNOTATOR, Kind.AUDIT: Role.AUDITOR}


def _error(exc: AnnotationError) -> Response:
    return Response({"code": exc.code, "detail": exc.message, "errors": exc.errors}, status=exc.status_code)


class SaveInput(serializers.Serializer):
    values = serializers.JSONField(help_text="Schema fields: {name: value}.")
    version = serializers.IntegerField(min_value=0, help_text="Version the edits are based on; stale -> 409.")
    provenance = serializers.JSONField(required=False, default=dict,
                                       help_text='{field: {"letter": "B"}} for fields taken from a candidate.')
    time_spent_ms = serializers.IntegerField(required=False, default=0, min_value=0,
                                             help_text="Active milliseconds since the previous successful save.")


class SaveOutput(serializers.Serializer):
    version = serializers.IntegerField()
    status = serializers.CharField()
    holds_slot = serializers.BooleanField(help_text="False: your claim expired and the slot was taken; the draft is kept.")
    saved_at = serializers.DateTimeField()
    # Nothing about where the item went after its N-th submission: that would tell the
    # annotator whether the other annotations matched theirs (blindness, SPEC section 4).


class ErrorOutput(serializers.Serializer):
    code = serializers.CharField(help_text="invalid / stale / slot_taken / closed / not_assigned / content_warning")
    detail = serializers.CharField()
    errors = serializers.DictField(child=serializers.CharField(), help_text="Per-field messages.")


def _save_output(result) -> dict:
    a = result.annotation
    return {"version": a.version, "status": a.status, "holds_slot": result.holds_slot, "saved_at": a.updated_at}


class _OwnAnnotationApi(APIView):
    kind = Kind.ANNOTATION

    def _annotation(self, request, slug, item_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=[ROLE_FOR_KIND[self.kind]])
        return annotation_get_for_annotator(user=request.user, project=project, item_id=item_id, kind=self.kind)


class AnnotationStateApi(_OwnAnnotationApi):
    """The caller's own annotation of an item, with anonymized candidates (none in an audit)."""

    @extend_schema(responses=inline_serializer("AnnotationState", {
        "annotation": serializers.DictField(), "candidates": serializers.ListField(child=serializers.DictField()),
        "item": serializers.DictField(),
    }))
    def get(self, request, slug, item_id, kind=Kind.ANNOTATION):
        self.kind = kind
        ws = workspace_for_annotator(annotation=self._annotation(request, slug, item_id), audit=kind == Kind.AUDIT)
        item = ws.item
        return Response({
            "annotation": ws.state,
            "item": {"id": item.pk, "text": item.text, "title": item.title, "width": item.width, "height": item.height,
                     "image_url": reverse("item_image", args=[slug, item.pk])},
            "candidates": [{"letter": c.letter, "fields": c.values} for c in ws.candidates],
        })


class AnnotationDraftApi(_OwnAnnotationApi):
    """Autosave a draft (or a pending revision of a submitted annotation)."""

    @extend_schema(request=SaveInput, responses={200: SaveOutput, 400: ErrorOutput, 409: ErrorOutput})
    def post(self, request, slug, item_id, kind=Kind.ANNOTATION):
        self.kind = kind
        annotation = self._annotation(request, slug, item_id)
        data = SaveInput(data=request.data)
        if not data.is_valid():
            return Response({"code": "invalid", "detail": "Malformed request.", "errors": data.errors}, status=400)
        try:
            result = annotation_save_draft(annotator=request.user, item=annotation.item, kind=kind, **data.validated_data)
        except AnnotationError as exc:
            return _error(exc)
        return Response(SaveOutput(_save_output(result)).data)


class AnnotationSubmitApi(_OwnAnnotationApi):
    """Validate and submit; 400 with per-field errors, 409 when stale, taken or closed."""

    @extend_schema(request=SaveInput, responses={200: SaveOutput, 400: ErrorOutput, 409: ErrorOutput})
    def post(self, request, slug, item_id, kind=Kind.ANNOTATION):
        self.kind = kind
        annotation = self._annotation(request, slug, item_id)
        data = SaveInput(data=request.data)
        if not data.is_valid():
            return Response({"code": "invalid", "detail": "Malformed request.", "errors": data.errors}, status=400)
        try:
            result = annotation_submit(annotator=request.user, item=annotation.item, kind=kind, **data.validated_data)
        except AnnotationError as exc:
            return _error(exc)
        return Response(SaveOutput(_save_output(result)).data)


class SkipInput(serializers.Serializer):
    reason = serializers.ChoiceField(choices=sorted(SKIP_REASON_KEYS))
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=1000)


class AnnotationSkipApi(_OwnAnnotationApi):
    @extend_schema(request=SkipInput, responses={200: inline_serializer("SkipOutput", {"status": serializers.CharField()})})
    def post(self, request, slug, item_id, kind=Kind.ANNOTATION):
        self.kind = kind
        annotation = self._annotation(request, slug, item_id)
        data = SkipInput(data=request.data)
        if not data.is_valid():
            return Response({"code": "invalid", "detail": "Choose a reason.", "errors": data.errors}, status=400)
        try:
            skipped = annotation_skip(annotator=request.user, item=annotation.item, kind=kind, **data.validated_data)
        except AnnotationError as exc:
            return _error(exc)
        return Response({"status": skipped.status})


class AnnotationNextApi(APIView):
    """Claim the next item (or resume your unfinished one)."""

    @extend_schema(request=None, responses=inline_serializer("NextOutput", {
        "outcome": serializers.CharField(help_text="claimed / resumed / empty / break"),
        "item_id": serializers.IntegerField(allow_null=True), "url": serializers.CharField(allow_null=True),
    }))
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.ANNOTATOR])
        pref = annotator_preference(user=request.user, project=project)
        if pref is None or pref.content_warning_accepted_at is None:
            return Response({"code": "content_warning", "detail": "Read the content warning first.", "errors": {},
                             "url": reverse("annotate_warning", args=[slug])}, status=403)
        result = assignment_claim_next(annotator=request.user, project=project)
        item_id = result.annotation.item_id if result.annotation else None
        return Response({
            "outcome": result.outcome, "item_id": item_id,
            "url": reverse("annotate_item", args=[slug, item_id]) if item_id else None,
        })
