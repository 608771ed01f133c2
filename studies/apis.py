"""REST endpoints of the reference-independence study. One APIView per operation (CONVENTIONS).

Access (projects.access: non-member 404, wrong role 403): creating and confirming a study:
leads; its status and report: leads and researchers; a participant's next meme and their own
re-explanation: annotators and reviewers, their own only (someone else's is 404). The
participant's JSON is the blind workspace (studies.selectors.participant_workspace): their text
and an image URL, nothing of the reference, the item or the other participant.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.apis import ErrorOutput
from projects.access import project_get_for_user
from projects.models import Role
from studies import selectors, services
from studies.models import Study

LEAD = [Role.LEAD]
READERS = [Role.LEAD, Role.RESEARCHER]


class StratumOutput(serializers.Serializer):
    key = serializers.CharField()
    label = serializers.CharField()
    population = serializers.IntegerField(help_text="Eligible items of the stratum when it was drawn.")
    sampled = serializers.IntegerField()


class StudyOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=Study.Status.choices)
    reference_field = serializers.CharField()
    strata_fields = serializers.ListField(child=serializers.CharField())
    sample_size = serializers.IntegerField(help_text="Items asked for.")
    seed = serializers.IntegerField()
    eligible = serializers.IntegerField(help_text="Items that had a reference and were not excluded.")
    strata = StratumOutput(many=True)
    sampled = serializers.IntegerField()
    progress = serializers.DictField(
        child=serializers.IntegerField(), help_text="Items per state: reexplaining, judging, adjudication, done."
    )


def _study_data(study: Study) -> dict:
    return {
        "id": study.pk,
        "name": study.name,
        "status": study.status,
        "reference_field": study.reference_field,
        "strata_fields": study.strata_fields,
        "sample_size": study.sample_size,
        "seed": study.seed,
        "eligible": study.eligible,
        "strata": study.strata,
        "sampled": study.items.count(),
        "progress": selectors.study_counts(study=study),
    }


class StudyCreateInput(serializers.Serializer):
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    sample_size = serializers.IntegerField(default=150, min_value=1, max_value=services.MAX_SAMPLE)
    seed = serializers.IntegerField(default=0)
    strata_fields = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Default: language and domain when in the schema."
    )
    reference_field = serializers.CharField(default=selectors.DEFAULT_REFERENCE)


class StudyListCreateApi(APIView):
    @extend_schema(
        summary="Independence studies of the project (leads, researchers)", responses={200: StudyOutput(many=True)}
    )
    def get(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
        return Response([_study_data(s) for s in project.independence_studies.all()])

    @extend_schema(
        summary="Draw a stratified sample into a draft study; confirm it to start (leads)",
        request=StudyCreateInput,
        responses={201: StudyOutput, 400: ErrorOutput},
    )
    def post(self, request, slug):
        project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
        data = StudyCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        if "strata_fields" not in values:
            values["strata_fields"] = selectors.default_strata(project)
        study = services.study_draw(project=project, lead=request.user, **values)
        return Response(_study_data(study), status=status.HTTP_201_CREATED)


class StudyStatusApi(APIView):
    @extend_schema(
        summary="A study's settings, strata table and progress (leads, researchers)", responses={200: StudyOutput}
    )
    def get(self, request, slug, study_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
        return Response(_study_data(selectors.study_get_for_user(project=project, study_id=study_id)))


class StudyConfirmApi(APIView):
    @extend_schema(
        summary="Confirm a drawn sample: participants may start (leads)",
        request=None,
        responses={200: StudyOutput, 409: ErrorOutput},
    )
    def post(self, request, slug, study_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=LEAD)
        study = selectors.study_get_for_user(project=project, study_id=study_id)
        return Response(_study_data(services.study_confirm(study=study, lead=request.user)))


class StudyReportApi(APIView):
    @extend_schema(
        summary="The study's report: compatible share with a Wilson 95% CI, per stratum, conflicts, revisions, "
        "removals (leads, researchers)",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, slug, study_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=READERS)
        return Response(selectors.study_report(study=selectors.study_get_for_user(project=project, study_id=study_id)))


class ReexplanationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField(allow_blank=True, help_text="Your own text (draft or submitted).")
    version = serializers.IntegerField(help_text="Send it back with the next save; a stale one gets 409.")
    submitted = serializers.BooleanField()
    image_url = serializers.CharField(help_text="The meme's image: all you are shown.")


def _workspace(request, project, study_id, r) -> dict:
    ws = selectors.participant_workspace(reexplanation=r)
    url = reverse(
        "study_reexplain_image",
        kwargs={"slug": project.slug, "study_id": study_id, "reexplanation_id": ws.reexplanation_id},
    )
    return {
        "id": ws.reexplanation_id,
        "text": ws.text,
        "version": ws.version,
        "submitted": ws.submitted,
        "image_url": request.build_absolute_uri(url),
    }


class ReexplanationNextApi(APIView):
    @extend_schema(
        summary="Your open re-explanation, or the next meme to re-explain blind (annotators, reviewers)",
        request=None,
        responses={
            200: ReexplanationOutput,
            204: OpenApiResponse(description="Nothing left for you."),
            409: ErrorOutput,
        },
    )
    def post(self, request, slug, study_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=selectors.PARTICIPANT_ROLES)
        study = selectors.study_get_for_user(project=project, study_id=study_id)
        r = services.reexplanation_claim_next(study=study, participant=request.user)
        if r is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(_workspace(request, project, study.pk, r))


class ReexplanationSaveInput(serializers.Serializer):
    text = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=services.MAX_TEXT)
    version = serializers.IntegerField()
    submit = serializers.BooleanField(default=False)


class ReexplanationApi(APIView):
    @extend_schema(
        summary="Your re-explanation (annotators, reviewers; yours only)", responses={200: ReexplanationOutput}
    )
    def get(self, request, slug, study_id, reexplanation_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=selectors.PARTICIPANT_ROLES)
        study = selectors.study_get_for_user(project=project, study_id=study_id)
        r = selectors.reexplanation_get_for_participant(
            user=request.user, study=study, reexplanation_id=reexplanation_id
        )
        return Response(_workspace(request, project, study.pk, r))

    @extend_schema(
        summary="Save (or submit) your re-explanation",
        request=ReexplanationSaveInput,
        responses={200: ReexplanationOutput, 400: ErrorOutput, 409: ErrorOutput},
    )
    def post(self, request, slug, study_id, reexplanation_id):
        project = project_get_for_user(user=request.user, slug=slug, roles=selectors.PARTICIPANT_ROLES)
        study = selectors.study_get_for_user(project=project, study_id=study_id)
        r = selectors.reexplanation_get_for_participant(
            user=request.user, study=study, reexplanation_id=reexplanation_id
        )
        data = ReexplanationSaveInput(data=request.data)
        data.is_valid(raise_exception=True)
        saved = services.reexplanation_save(reexplanation=r, participant=request.user, **data.validated_data)
        return Response(_workspace(request, project, study.pk, saved))
