"""The submit endpoint of the annotation workspace: it spans annotation and adjudication
(workflow.services.annotation_submit), so it lives here, above both."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.apis import OwnAnnotationApi, SaveInput, SaveOutput, save_output
from annotation.models import Kind
from candidates.models import Conversion, ConversionJob
from candidates.services.conversion import conversions_retry_failed
from core.apis import ErrorOutput, JobOutput
from core.errors import Invalid, NotFound
from projects.access import project_get_for_user
from projects.fieldtypes import REGISTRY
from projects.members import (
    INVITE_DAYS,
    MAX_CSV_BYTES,
    invitation_create,
    invitation_revoke,
    invitations_pending,
    member_add,
    member_deactivate,
    member_reactivate,
    member_roles_set,
    members_import_csv,
    members_of,
)
from projects.models import Item, Role, SchemaVersion, Stage
from projects.schema import DEFAULT_THRESHOLDS
from projects.schema_io import MAX_SCHEMA_BYTES, schema_dump, schema_parse, schema_problems
from projects.services import AUTO_MERGE_RULES, SETTINGS_KEYS, settings_clean, skip_reasons_of, split_preview
from projects.workflow import FLAG_REASONS
from workflow.services import FAILED_SHOWN, annotation_submit, conversions_overview, item_flag
from workflow.setup import member_progress, schema_change, schema_change_impact, study_settings_update


class AnnotationSubmitApi(OwnAnnotationApi):
    """Validate and submit; 400 with per-field errors, 409 when stale, taken or closed."""

    @extend_schema(
        request=SaveInput,
        responses={200: SaveOutput, 400: ErrorOutput, 403: ErrorOutput, 404: ErrorOutput, 409: ErrorOutput},
    )
    def post(self, request, slug, item_id, kind=Kind.ANNOTATION):
        self.kind = kind
        item = self._item(request, slug, item_id)
        data = self._save_input(request, slug, item_id)
        result = annotation_submit(annotator=request.user, item=item, kind=kind, **data)
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


# ---------------------------------------------------------------- study setup (leads)


class SchemaOutput(serializers.Serializer):
    version = serializers.IntegerField()
    schema = serializers.DictField(help_text="{version, fields: [...]}; field types: " + ", ".join(REGISTRY))
    versions = serializers.ListField(child=serializers.IntegerField())


class SchemaInput(serializers.Serializer):
    schema = serializers.JSONField(required=False, help_text="The schema as an object ({fields: [...]}).")
    text = serializers.CharField(
        required=False, max_length=MAX_SCHEMA_BYTES, help_text="Or the schema as JSON / YAML text."
    )
    format = serializers.ChoiceField(choices=["json", "yaml"], default="json")
    version = serializers.IntegerField(
        required=False, allow_null=True, default=None, help_text="The version you edited: another -> 409."
    )
    confirm = serializers.BooleanField(
        default=False, help_text="Save although existing records would not validate (they keep their version)."
    )


class ImpactOutput(serializers.Serializer):
    started = serializers.BooleanField()
    annotations_checked = serializers.IntegerField()
    gold_checked = serializers.IntegerField()
    invalid_annotations = serializers.IntegerField()
    invalid_gold = serializers.IntegerField()
    by_field = serializers.DictField(child=serializers.IntegerField())
    invalid = serializers.ListField(child=serializers.DictField(), help_text="The first 50 records and their errors.")


def _schema_of(data: dict):
    if data.get("text"):
        return schema_parse(data["text"], fmt=data["format"])
    if "schema" not in data:
        raise Invalid("Send the schema (object) or its text.", errors={"schema": "required"})
    return data["schema"]


class SchemaApi(APIView):
    """GET the current schema (``?format=yaml`` for YAML text); POST a new one (validated through the
    field-type registry; 409 ``confirm`` with the impact when saved work would not validate)."""

    @extend_schema(responses={200: SchemaOutput, 403: ErrorOutput, 404: ErrorOutput})
    def get(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        if request.query_params.get("format") == "yaml":
            return HttpResponse(schema_dump(project.schema, fmt="yaml"), content_type="application/yaml")
        versions = list(
            SchemaVersion.objects.filter(project=project).order_by("version").values_list("version", flat=True)
        )
        return Response({"version": project.schema_version, "schema": project.schema, "versions": versions})

    @extend_schema(
        request=SchemaInput,
        responses={200: SchemaOutput, 400: ErrorOutput, 403: ErrorOutput, 404: ErrorOutput, 409: ErrorOutput},
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        data = SchemaInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        project, _ = schema_change(
            project=project, schema=_schema_of(v), expected_version=v["version"], confirm=v["confirm"]
        )
        versions = list(
            SchemaVersion.objects.filter(project=project).order_by("version").values_list("version", flat=True)
        )
        return Response({"version": project.schema_version, "schema": project.schema, "versions": versions})


class SchemaCheckApi(APIView):
    """Dry run: every problem of a schema by field and rule, and which saved records it would make
    invalid. Nothing is saved."""

    @extend_schema(
        request=SchemaInput,
        responses={
            200: inline_serializer(
                "SchemaCheck",
                {
                    "ok": serializers.BooleanField(),
                    "problems": serializers.DictField(child=serializers.CharField()),
                    "impact": ImpactOutput(allow_null=True),
                },
            ),
            400: ErrorOutput,
            403: ErrorOutput,
        },
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        data = SchemaInput(data=request.data)
        data.is_valid(raise_exception=True)
        schema = _schema_of(data.validated_data)
        problems = schema_problems(schema)
        impact = None if problems else schema_change_impact(project=project, schema=schema).as_dict()
        return Response({"ok": not problems, "problems": problems, "impact": impact})


class MemberOutput(serializers.Serializer):
    user_id = serializers.IntegerField(source="user.pk")
    username = serializers.CharField(source="user.username")
    email = serializers.CharField(source="user.email")
    active = serializers.BooleanField()
    roles = serializers.ListField(child=serializers.CharField())
    inactive_roles = serializers.ListField(child=serializers.CharField())
    progress = serializers.DictField(
        allow_null=True, help_text="submitted, skipped, drafts, audits, decided, minutes, per_item_s, share, last"
    )


def _members_payload(project):
    people = members_of(project=project)
    progress = member_progress(project=project)
    for person in people:
        g = progress.get(person["user"].pk)
        person["progress"] = (
            {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in g.items() if k != "annotator_id"}
            if g
            else None
        )
    return MemberOutput(people, many=True).data


class MemberAddInput(serializers.Serializer):
    identifier = serializers.CharField(max_length=254, help_text="Username or email of an existing user.")
    roles = serializers.ListField(child=serializers.ChoiceField(choices=Role.values), min_length=1)


class MemberListApi(APIView):
    """Members (active and deactivated) with their roles and progress; POST adds an existing user."""

    @extend_schema(responses={200: MemberOutput(many=True), 403: ErrorOutput, 404: ErrorOutput})
    def get(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        return Response(_members_payload(project))

    @extend_schema(
        request=MemberAddInput,
        responses={201: MemberOutput(many=True), 400: ErrorOutput, 403: ErrorOutput, 409: ErrorOutput},
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        data = MemberAddInput(data=request.data)
        data.is_valid(raise_exception=True)
        member_add(project=project, **data.validated_data)
        return Response(_members_payload(project), status=status.HTTP_201_CREATED)


class MemberUpdateInput(serializers.Serializer):
    roles = serializers.ListField(child=serializers.ChoiceField(choices=Role.values), required=False, min_length=1)
    active = serializers.BooleanField(
        required=False, help_text="false: deactivate (past work stays); true: reactivate."
    )


class MemberApi(APIView):
    """POST a member's roles, or deactivate / reactivate them (the last lead stays a lead); fields
    left out are not changed."""

    @extend_schema(
        operation_id="projects_member_update",
        request=MemberUpdateInput,
        responses={
            200: MemberOutput(many=True),
            400: ErrorOutput,
            403: ErrorOutput,
            404: ErrorOutput,
            409: ErrorOutput,
        },
    )
    def post(self, request, slug, user_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        user = get_user_model().objects.filter(pk=user_id, memberships__project=project).distinct().first()
        if user is None:
            raise NotFound("No such member.")
        data = MemberUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        if v.get("active") is False:
            member_deactivate(project=project, user=user)
        elif v.get("active") is True:
            member_reactivate(project=project, user=user)
        if "roles" in v:
            member_roles_set(project=project, user=user, roles=v["roles"])
        return Response(_members_payload(project))


class CsvInput(serializers.Serializer):
    file = serializers.FileField(help_text="CSV with columns username,email,roles (UTF-8, header optional).")


class MemberCsvApi(APIView):
    """Bulk add: good rows are added (or invited: the tokens are in the answer, shown once), bad rows listed."""

    parser_classes = [MultiPartParser]

    @extend_schema(
        request=CsvInput,
        responses={
            200: inline_serializer(
                "CsvResult",
                {
                    "added": serializers.ListField(child=serializers.DictField()),
                    "invited": serializers.ListField(child=serializers.DictField()),
                    "problems": serializers.ListField(child=serializers.DictField()),
                },
            ),
            400: ErrorOutput,
            403: ErrorOutput,
        },
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        data = CsvInput(data=request.data)
        data.is_valid(raise_exception=True)
        result = members_import_csv(
            project=project, data=data.validated_data["file"].read(MAX_CSV_BYTES + 1), by=request.user
        )
        invited = [
            {**row, "url": request.build_absolute_uri(reverse("invitation", args=[row["token"]]))}
            for row in result.invited
        ]
        return Response({"added": result.added, "invited": invited, "problems": result.problems})


class InvitationInput(serializers.Serializer):
    email = serializers.CharField(max_length=254)
    roles = serializers.ListField(child=serializers.ChoiceField(choices=Role.values), min_length=1)
    days = serializers.IntegerField(default=INVITE_DAYS, min_value=1, max_value=30)


class InvitationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.CharField()
    roles = serializers.ListField(child=serializers.CharField())
    expires_at = serializers.DateTimeField()
    token = serializers.CharField(required=False, help_text="Only in the answer that made it.")
    url = serializers.CharField(required=False, help_text="Only in the answer that made it.")


class InvitationApi(APIView):
    """Pending invitations; POST makes a one-time expiring link (409 when the address is a member)."""

    @extend_schema(responses={200: InvitationOutput(many=True), 403: ErrorOutput})
    def get(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        return Response(InvitationOutput(invitations_pending(project=project), many=True).data)

    @extend_schema(
        request=InvitationInput, responses={201: InvitationOutput, 400: ErrorOutput, 403: ErrorOutput, 409: ErrorOutput}
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        data = InvitationInput(data=request.data)
        data.is_valid(raise_exception=True)
        invitation, token = invitation_create(project=project, by=request.user, **data.validated_data)
        out = InvitationOutput(invitation).data
        return Response(
            {**out, "token": token, "url": request.build_absolute_uri(reverse("invitation", args=[token]))},
            status=status.HTTP_201_CREATED,
        )


class InvitationRevokeApi(APIView):
    """Revoke a pending invitation: its link stops working."""

    @extend_schema(request=None, responses={204: None, 403: ErrorOutput, 404: ErrorOutput})
    def post(self, request, slug, invitation_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        invitation_revoke(project=project, invitation_id=invitation_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class StudySettingsOutput(serializers.Serializer):
    annotators_per_item = serializers.IntegerField()
    claim_timeout_minutes = serializers.IntegerField()
    session_item_cap = serializers.IntegerField()
    skip_reasons = serializers.ListField(child=serializers.ListField(child=serializers.CharField()))
    thresholds = serializers.DictField(
        child=serializers.FloatField(),
        help_text="Overrides of " + ", ".join(f"{k}={v}" for k, v in DEFAULT_THRESHOLDS.items()),
    )
    auto_merge_rules = serializers.ListField(child=serializers.ChoiceField(choices=list(AUTO_MERGE_RULES)))
    audit_sample_size = serializers.IntegerField()
    audit_strata = serializers.ListField(child=serializers.CharField())
    split_ratios = serializers.ListField(child=serializers.FloatField())
    split_seed = serializers.IntegerField()
    phash_threshold = serializers.IntegerField()
    workflow = serializers.ListField(
        child=serializers.DictField(), help_text="Stages as data (projects.workflow); empty: one adjudicated stage."
    )
    ocr_on_import = serializers.BooleanField()
    split_preview = serializers.ListField(
        child=serializers.DictField(),
        read_only=True,
        help_text="Sizes of the splits of the gold items by the ratios; empty ones flagged.",
    )


def _settings_payload(project) -> dict:
    data = {key: getattr(project, key) for key in SETTINGS_KEYS}
    data["skip_reasons"] = skip_reasons_of(project)
    data["split_ratios"] = list(project.split_ratios or [0.85, 0.05, 0.10])
    gold = Item.objects.filter(project=project, stage=Stage.GOLD).count()
    data["split_preview"] = split_preview(ratios=data["split_ratios"], n=gold)
    return data


class StudySettingsInput(serializers.Serializer):
    settings = serializers.DictField(help_text="Any of: " + ", ".join(SETTINGS_KEYS))
    confirm = serializers.BooleanField(
        default=False, help_text="Apply a change whose effect on items was explained (409 confirm)."
    )
    dry_run = serializers.BooleanField(
        default=False, help_text="Only check; answer the split preview for the new ratios."
    )


class StudySettingsApi(APIView):
    """GET the study settings; POST some of them (each checked; lowering annotators per item below
    what items already have answers 409 ``confirm`` with the explanation, nothing saved)."""

    @extend_schema(responses={200: StudySettingsOutput, 403: ErrorOutput, 404: ErrorOutput})
    def get(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        return Response(StudySettingsOutput(_settings_payload(project)).data)

    @extend_schema(
        request=StudySettingsInput,
        responses={200: StudySettingsOutput, 400: ErrorOutput, 403: ErrorOutput, 409: ErrorOutput},
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        data = StudySettingsInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        if v["dry_run"]:
            clean = settings_clean(project=project, data=v["settings"])
            payload = {**_settings_payload(project), **clean}
            gold = Item.objects.filter(project=project, stage=Stage.GOLD).count()
            payload["split_preview"] = split_preview(ratios=payload["split_ratios"], n=gold)
            return Response(StudySettingsOutput(payload).data)
        project, _ = study_settings_update(project=project, data=v["settings"], confirm=v["confirm"])
        return Response(StudySettingsOutput(_settings_payload(project)).data)


# ---------------------------------------------------------------- model stages (leads)


class ConversionFlagOutput(serializers.Serializer):
    check = serializers.CharField(help_text="schema / count / link / entity_in_visual")
    field = serializers.CharField(help_text="The stage field the finding concerns.")
    item = serializers.CharField(allow_null=True, help_text="The checklist item id (V1, I2 ...), if one.")
    message = serializers.CharField()


class ConversionRowOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    item_id = serializers.IntegerField()
    source_id = serializers.CharField(source="item.source_id")
    status = serializers.CharField(help_text="pending / running / done / failed / cancelled")
    provider = serializers.CharField(source="provider.name", allow_null=True, help_text="The provider that replied.")
    model_name = serializers.CharField(help_text="The model name reported with the reply.")
    attempts = serializers.IntegerField()
    error = serializers.CharField(help_text="Why it failed (provider error, unreadable reply); empty otherwise.")
    flags = ConversionFlagOutput(many=True, help_text="What the automated checks found (shown to the reviewer).")
    updated_at = serializers.DateTimeField()


class ConversionDetailOutput(ConversionRowOutput):
    stage = serializers.CharField(source="stage_name", help_text="The model stage's name.")
    values = serializers.JSONField(help_text="The stage's fields as read from the reply (the review starts from them).")
    raw_reply = serializers.CharField(help_text="The model's reply, verbatim.")
    prompt_sha = serializers.CharField()
    latency_ms = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class ConversionStageOutput(serializers.Serializer):
    name = serializers.CharField(source="stage.name")
    label = serializers.CharField(source="stage.label")
    provider = serializers.CharField(help_text="The provider the stage names; empty: the project's only enabled one.")
    total = serializers.IntegerField(help_text="Conversions of this stage, whatever their status.")
    done = serializers.IntegerField(source="counts.done")
    pending = serializers.IntegerField(source="counts.pending", help_text="Queued, or waiting for a retry.")
    running = serializers.IntegerField(source="counts.running")
    failed = serializers.IntegerField(source="counts.failed")
    cancelled = serializers.IntegerField(source="counts.cancelled", help_text="The item left the stage first.")
    flagged = serializers.IntegerField(help_text="Done conversions with at least one automated-check finding.")
    failures = ConversionRowOutput(many=True, source="failed", help_text=f"At most {FAILED_SHOWN}, by item.")
    flagged_conversions = ConversionRowOutput(many=True, source="flag_rows", help_text=f"At most {FAILED_SHOWN}.")


class ConversionsOutput(serializers.Serializer):
    job = JobOutput(allow_null=True, help_text="The project's latest conversion job.")
    stages = ConversionStageOutput(many=True)


def _conversions_payload(project) -> dict:
    return {
        "job": ConversionJob.objects.filter(project=project).order_by("-created_at", "-id").first(),
        "stages": conversions_overview(project=project, workflow=project.get_workflow()),
    }


class ConversionsApi(APIView):
    """The model stages' progress (MemeBench: explanations converted into VIKR checklists)."""

    @extend_schema(
        summary="Progress of the model stages: counts, failures, flagged conversions (leads)",
        operation_id="projects_conversions_list_progress",
        responses={200: ConversionsOutput, 403: ErrorOutput, 404: ErrorOutput},
    )
    def get(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        return Response(ConversionsOutput(_conversions_payload(project)).data)


class ConversionApi(APIView):
    @extend_schema(
        summary="One conversion: the reply verbatim, the values read from it, the checks' findings (leads)",
        operation_id="projects_conversion_retrieve",
        responses={200: ConversionDetailOutput, 403: ErrorOutput, 404: ErrorOutput},
    )
    def get(self, request, slug, conversion_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        conversion = (
            Conversion.objects.select_related("item", "provider")
            .filter(item__project=project, pk=conversion_id)
            .first()
        )
        if conversion is None:
            raise NotFound("No such conversion in this project.")
        conversion.stage_name = project.get_workflow().stage(conversion.stage).name
        return Response(ConversionDetailOutput(conversion).data)


class ConversionRetryInput(serializers.Serializer):
    conversion_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**62),
        required=False,
        allow_empty=False,
        max_length=100_000,
        help_text="Failed conversions to queue again; omit for every failed conversion of the project.",
    )


class ConversionRetryOutput(serializers.Serializer):
    queued = serializers.IntegerField(help_text="Failed conversions queued again.")
    progress = ConversionsOutput()


class ConversionRetryApi(APIView):
    """Queue failed conversions again (a provider outage, a reply that could not be read)."""

    @extend_schema(
        summary="Retry failed conversions (leads)",
        request=ConversionRetryInput,
        responses={202: ConversionRetryOutput, 400: ErrorOutput, 403: ErrorOutput, 404: ErrorOutput},
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=[Role.LEAD])
        data = ConversionRetryInput(data=request.data)
        data.is_valid(raise_exception=True)
        n = conversions_retry_failed(
            project=project, user=request.user, conversion_ids=data.validated_data.get("conversion_ids")
        )
        payload = {"queued": n, "progress": _conversions_payload(project)}
        return Response(ConversionRetryOutput(payload).data, status=status.HTTP_202_ACCEPTED)
