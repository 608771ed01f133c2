"""REST endpoints of the quality reports. One APIView per operation (CONVENTIONS).

Access: agreement and audit reports: leads and researchers (read-only); starting a report
job or an audit, and job progress: leads; anchoring (hidden model identities and annotator
names): leads only. Non-members get 404, other roles 403 (projects.access).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.apis import ErrorOutput, JobOutput
from core.errors import Invalid
from projects.access import project_get_for_user
from projects.models import Role
from projects.selectors import job_get_for_project
from quality import anchoring, audits, reports
from quality.forms import ReportFilterForm
from quality.models import AgreementReport
from quality.services import (
    DEFAULT_AUDIT_SIZE,
    MAX_AUDIT_SIZE,
    agreement_report_current,
    agreement_report_request,
    audit_create,
)

LEAD = [Role.LEAD]
READERS = [Role.LEAD, Role.RESEARCHER]

FILTER_PARAMETERS = [
    OpenApiParameter("source_dataset", str, description="Only items of this source dataset."),
    OpenApiParameter("language", str, description="Only items in this language."),
    OpenApiParameter("category", str, description='"field=value": items where at least one annotator chose it.'),
    OpenApiParameter("date_from", OpenApiTypes.DATE, description="Items whose annotation pair completed on or after."),
    OpenApiParameter("date_to", OpenApiTypes.DATE, description="Items whose annotation pair completed on or before."),
    OpenApiParameter(
        "scope",
        str,
        enum=["both", "either", "all"],
        description="Items over which target (conditional) fields are scored; default both.",
    ),
]


def _clean_filters(project, data) -> tuple[dict | None, dict | None]:
    keys = set(ReportFilterForm.base_fields)
    present = {k: v for k, v in data.items() if k in keys}
    unknown = sorted(set(data) - keys - {"format", "limit", "offset"})
    if unknown:
        return None, {"__all__": [f"unknown filter(s): {', '.join(unknown)}"]}
    form = ReportFilterForm(present or None, options=reports.filter_options(project=project))
    if not present:
        return dict(reports.DEFAULT_FILTERS), None
    if not form.is_valid():
        return None, {k: [str(m) for m in v] for k, v in form.errors.items()}
    return form.filters(), None


class FigureOutput(serializers.Serializer):
    key = serializers.CharField()
    label = serializers.CharField()
    value = serializers.FloatField(
        allow_null=True, help_text="Null when the statistic is undefined (e.g. κ with one category)."
    )
    ci = serializers.ListField(child=serializers.FloatField(), allow_null=True, help_text="[low, high], bootstrap 95%.")
    n = serializers.IntegerField(help_text="Items the figure is computed over.")
    primary = serializers.BooleanField(help_text="The field's headline figure (Meme3W Stage 2).")


class FieldAgreementOutput(serializers.Serializer):
    field = serializers.CharField()
    label = serializers.CharField()
    type = serializers.CharField()
    metric = serializers.CharField(help_text="Agreement metric of the field type (projects.fieldtypes).")
    conditional = serializers.BooleanField()
    items = serializers.CharField(help_text="Which items the figures are computed over.")
    n = serializers.IntegerField()
    figures = FigureOutput(many=True)
    per_label_kappa = serializers.DictField(child=serializers.FloatField(allow_null=True), required=False)


class AgreementOutput(serializers.Serializer):
    report_version = serializers.IntegerField()
    schema_version = serializers.IntegerField()
    lexicon_version = serializers.IntegerField(allow_null=True)
    annotators_per_item = serializers.IntegerField()
    filters = serializers.DictField()
    scope = serializers.CharField()
    scope_description = serializers.CharField()
    n_items = serializers.IntegerField()
    n_annotations = serializers.IntegerField()
    max_slots = serializers.IntegerField()
    method = serializers.DictField()
    headline = serializers.ListField(child=serializers.DictField(), help_text="Primary figure of each target field.")
    fields = FieldAgreementOutput(many=True)


class AgreementJobOutput(JobOutput):
    filters = serializers.DictField()


class AgreementPendingOutput(serializers.Serializer):
    detail = serializers.CharField()
    job = AgreementJobOutput(required=False, help_text="The job computing it, when one was started.")


class AgreementReportApi(APIView):
    @extend_schema(
        summary="Pre-adjudication agreement report (leads, researchers)",
        parameters=FILTER_PARAMETERS,
        responses={200: AgreementOutput, 202: AgreementPendingOutput, 400: ErrorOutput},
    )
    def get(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
        filters, errors = _clean_filters(project, request.query_params)
        if errors:
            raise Invalid("Invalid filters.", errors={k: " ".join(v) for k, v in errors.items()})
        state = agreement_report_current(project=project, filters=filters, user=request.user)
        if state["result"] and not state["stale"]:
            return Response(AgreementOutput(state["result"]["agreement"]).data)
        job = state["job"] or state["failed"]
        body = {"detail": "Not computed for the current data yet; a lead can start it (POST .../agreement/jobs/)."}
        if job is not None:
            body["job"] = AgreementJobOutput(job).data
        return Response(body, status=status.HTTP_202_ACCEPTED)


class AgreementJobStartApi(APIView):
    @extend_schema(
        summary="Recompute the agreement report for the current data (leads)",
        parameters=FILTER_PARAMETERS,
        request=None,
        responses={202: AgreementJobOutput, 400: ErrorOutput},
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
        filters, errors = _clean_filters(project, request.query_params)
        if errors:
            raise Invalid("Invalid filters.", errors={k: " ".join(v) for k, v in errors.items()})
        row, _ = agreement_report_request(project=project, filters=filters, user=request.user, force=True)
        return Response(AgreementJobOutput(row).data, status=status.HTTP_202_ACCEPTED)


class AgreementJobApi(APIView):
    @extend_schema(
        summary="Progress of an agreement report job (leads)", responses={200: AgreementJobOutput, 404: ErrorOutput}
    )
    def get(self, request, slug, report_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
        row = job_get_for_project(user=request.user, project=project, kind=AgreementReport.kind, job_id=report_id)
        return Response(AgreementJobOutput(row).data)


class AuditSummaryOutput(serializers.Serializer):
    id = serializers.IntegerField()
    size = serializers.IntegerField()
    seed = serializers.IntegerField()
    include_untargeted = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    n_items = serializers.IntegerField()
    n_assigned = serializers.IntegerField()
    n_submitted = serializers.IntegerField()


class AuditListApi(APIView):
    @extend_schema(
        summary="Candidate-blind audits of the project (leads, researchers)", responses=AuditSummaryOutput(many=True)
    )
    def get(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
        return Response(AuditSummaryOutput(audits.audits_for_project(project=project), many=True).data)


class AuditCreateInput(serializers.Serializer):
    size = serializers.IntegerField(
        min_value=1,
        max_value=MAX_AUDIT_SIZE,
        required=False,
        help_text=f"Gold items to sample (default: the project's audit sample size, {DEFAULT_AUDIT_SIZE} unless changed).",
    )
    seed = serializers.IntegerField(
        min_value=0,
        max_value=2**62,
        required=False,
        allow_null=True,
        help_text="Sampling seed; random (and stored) when omitted.",
    )
    include_untargeted = serializers.BooleanField(default=False, help_text="Also sample gold items without a target.")


class AuditCreateApi(APIView):
    @extend_schema(
        summary="Create a candidate-blind audit: stratified sample of gold items, assigned to auditors (leads)",
        request=AuditCreateInput,
        responses={201: AuditSummaryOutput, 400: OpenApiResponse(description="No gold, no auditor, n too large, ...")},
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
        data = AuditCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        audit = audit_create(
            project=project,
            created_by=request.user,
            **{"size": project.audit_sample_size, **data.validated_data},
        )
        row = audits.audits_for_project(project=project).get(pk=audit.pk)
        return Response(AuditSummaryOutput(row).data, status=status.HTTP_201_CREATED)


class AuditReportApi(APIView):
    @extend_schema(
        summary="Audit report: blind vs gold per field (Table 9) and models re-scored (leads, researchers)",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, slug, audit_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
        audit = audits.audit_get_for_project(project=project, audit_id=audit_id)
        return Response(audits.audit_report(audit=audit))


class AnchoringApi(APIView):
    @extend_schema(
        summary="Anchoring: how often annotators took and edited each hidden model's values (leads)",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
        return Response(anchoring.anchoring_report(project=project))
