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
from annotation.selectors import (
    annotation_get_for_annotator,
    annotation_item_check,
    annotator_preference,
    item_reference,
    workspace_for_annotator,
)
from annotation.services import SKIP_REASON_KEYS, annotation_save_draft, annotation_skip, assignment_claim_next
from candidates.selectors import candidates_for_annotator, candidates_with_identity
from core.apis import ErrorOutput
from projects.access import item_get_for_user, project_get_for_user, roles_of
from projects.models import Role

ROLE_FOR_KIND = {Kind.ANNOTATION: Role.ANNOTATOR, Kind.AUDIT: Role.AUDITOR}


class SaveInput(serializers.Serializer):
    values = serializers.JSONField(help_text="Schema fields: {name: value}.")
    version = serializers.IntegerField(min_value=0, help_text="Version the edits are based on; stale -> 409.")
    provenance = serializers.JSONField(
        required=False, default=dict, help_text='{field: {"letter": "B"}} for fields taken from a candidate.'
    )
    time_spent_ms = serializers.IntegerField(
        required=False, default=0, min_value=0, help_text="Active milliseconds since the previous successful save."
    )


class SaveOutput(serializers.Serializer):
    """The caller's own annotation only: nothing derived from other annotators (whether they
    agreed, where the item went) is ever part of it (SPEC section 4)."""

    version = serializers.IntegerField()
    status = serializers.CharField()
    holds_slot = serializers.BooleanField(
        help_text="False: your claim expired and the slot was taken; the draft is kept."
    )
    saved_at = serializers.DateTimeField()


def save_output(result) -> dict:
    a = result.annotation
    return {"version": a.version, "status": a.status, "holds_slot": result.holds_slot, "saved_at": a.updated_at}


class OwnAnnotationApi(APIView):
    kind = Kind.ANNOTATION

    def _annotation(self, request, slug, item_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=[ROLE_FOR_KIND[self.kind]])
        return annotation_get_for_annotator(user=request.user, project=project, item_id=item_id, kind=self.kind)

    def _item(self, request, slug, item_id):
        """The item a save writes, by reference: the save locks it within the project and reads
        the caller's annotation under the lock (404 when it is not theirs), so it is not read
        twice."""
        project = project_get_for_user(user=request.user, slug=slug, roles=[ROLE_FOR_KIND[self.kind]])
        return item_reference(project=project, item_id=item_id)

    def _save_input(self, request, slug, item_id) -> dict:
        """The validated save body. A refused body answers 404 first, as before, when the item is
        not the caller's (the check costs a query only on this error path)."""
        data = SaveInput(data=request.data)
        if not data.is_valid():
            self._annotation(request, slug, item_id)
            raise serializers.ValidationError(data.errors)
        return data.validated_data


class AnnotationStateApi(OwnAnnotationApi):
    """The caller's own annotation of an item, with anonymized candidates (none in an audit)."""

    @extend_schema(
        responses=inline_serializer(
            "AnnotationState",
            {
                "annotation": serializers.DictField(),
                "candidates": serializers.ListField(child=serializers.DictField()),
                "item": serializers.DictField(),
            },
        )
    )
    def get(self, request, slug, item_id, kind=Kind.ANNOTATION):
        self.kind = kind
        ws = workspace_for_annotator(annotation=self._annotation(request, slug, item_id), audit=kind == Kind.AUDIT)
        item = ws.item
        return Response(
            {
                "annotation": ws.state,
                "item": {
                    "id": item.pk,
                    "text": item.text,
                    "title": item.title,
                    "width": item.width,
                    "height": item.height,
                    "image_url": reverse("item_image", args=[slug, item.pk]),
                },
                "candidates": [{"letter": c.letter, "fields": c.values} for c in ws.candidates],
            }
        )


class AnnotationDraftApi(OwnAnnotationApi):
    """Autosave a draft (or a pending revision of a submitted annotation)."""

    @extend_schema(request=SaveInput, responses={200: SaveOutput, 400: ErrorOutput, 409: ErrorOutput})
    def post(self, request, slug, item_id, kind=Kind.ANNOTATION):
        self.kind = kind
        item = self._item(request, slug, item_id)
        data = self._save_input(request, slug, item_id)
        result = annotation_save_draft(annotator=request.user, item=item, kind=kind, **data)
        return Response(SaveOutput(save_output(result)).data)


class SkipInput(serializers.Serializer):
    reason = serializers.CharField(
        max_length=40,
        help_text="A key of the project's skip reasons (" + ", ".join(sorted(SKIP_REASON_KEYS)) + " by default).",
    )
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=1000)


class AnnotationSkipApi(OwnAnnotationApi):
    @extend_schema(
        request=SkipInput,
        responses={
            200: inline_serializer("SkipOutput", {"status": serializers.CharField()}),
            400: ErrorOutput,
            404: ErrorOutput,
            409: ErrorOutput,
        },
    )
    def post(self, request, slug, item_id, kind=Kind.ANNOTATION):
        self.kind = kind
        annotation = self._annotation(request, slug, item_id)
        data = SkipInput(data=request.data)
        data.is_valid(raise_exception=True)
        skipped = annotation_skip(annotator=request.user, item=annotation.item, kind=kind, **data.validated_data)
        return Response({"status": skipped.status})


class AnnotationNextApi(APIView):
    """Claim the next item (or resume your unfinished one)."""

    @extend_schema(
        request=None,
        responses=inline_serializer(
            "NextOutput",
            {
                "outcome": serializers.CharField(help_text="claimed / resumed / empty / break"),
                "item_id": serializers.IntegerField(allow_null=True),
                "url": serializers.CharField(allow_null=True),
            },
        ),
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.ANNOTATOR])
        pref = annotator_preference(user=request.user, project=project)
        if pref is None or pref.content_warning_accepted_at is None:
            return Response(
                {
                    "code": "content_warning",
                    "detail": "Read the content warning first.",
                    "errors": {},
                    "url": reverse("annotate_warning", args=[slug]),
                },
                status=403,
            )
        result = assignment_claim_next(annotator=request.user, project=project)
        item_id = result.annotation.item_id if result.annotation else None
        return Response(
            {
                "outcome": result.outcome,
                "item_id": item_id,
                "url": reverse("annotate_item", args=[slug, item_id]) if item_id else None,
            }
        )


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

    @extend_schema(
        summary="An item's candidates (identified for leads/researchers, anonymized for annotators)",
        responses={200: ItemCandidatesOutput, 403: ErrorOutput, 404: ErrorOutput},
    )
    def get(self, request, slug, item_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD, Role.RESEARCHER, Role.ANNOTATOR])
        item = item_get_for_user(user=request.user, project=project, item_id=item_id)
        if roles_of(user=request.user, project=project) & {Role.LEAD, Role.RESEARCHER}:
            rows = IdentifiedCandidateOutput(candidates_with_identity(item=item), many=True).data
            return Response({"anonymous": False, "candidates": rows})
        annotation_item_check(user=request.user, item=item)
        rows = AnonymousCandidateOutput(candidates_for_annotator(item=item, user=request.user), many=True).data
        return Response({"anonymous": True, "candidates": rows})
