"""Read paths of the reference-independence study: who may do what, the population a study
draws from, what each person's page may show, and the report.

Blindness (CONVENTIONS "Blindness is enforced in selectors"): ``participant_workspace`` is all a
re-explainer's page and endpoint receive -- their own text and a URL of the image that names
neither the item nor the study item. The reference, the item's text, title, metadata, stratum
and the other participant's work are never loaded into it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.http import Http404

from adjudication.models import AdjudicationTask
from annotation.models import Annotation
from core.errors import Invalid
from metrics.proportion import share
from projects.fieldtypes import SchemaError
from projects.models import Membership, Project, Role, Stage
from studies.models import Reexplanation, Study, StudyItem, Verdict

#: Re-explainers must be blind: leads see every reference on the study page, so they are not
#: offered as participants; they may judge and adjudicate.
PARTICIPANT_ROLES = (Role.ANNOTATOR, Role.REVIEWER)
JUDGE_ROLES = (Role.ANNOTATOR, Role.REVIEWER, Role.LEAD)
ADJUDICATOR_ROLES = (Role.REVIEWER, Role.LEAD)
DEFAULT_STRATA = ("language", "domain")
DEFAULT_REFERENCE = "explanation"
COMPATIBLE = (Verdict.FULLY, Verdict.PARTIALLY)


# ---------------------------------------------------------------- access


def study_get_for_user(*, project: Project, study_id) -> Study:
    """A study of ``project`` (already access-checked by projects.access); 404 otherwise."""
    try:
        return Study.objects.get(project=project, pk=int(study_id))
    except (Study.DoesNotExist, ValueError, TypeError):
        raise Http404("No such study") from None


def study_item_get(*, study: Study, study_item_id) -> StudyItem:
    try:
        return StudyItem.objects.select_related("item", "study").get(study=study, pk=int(study_item_id))
    except (StudyItem.DoesNotExist, ValueError, TypeError):
        raise Http404("No such item in this study") from None


def _reexplanation(*, study: Study, reexplanation_id) -> Reexplanation:
    try:
        return Reexplanation.objects.select_related("study_item__item", "study_item__study").get(
            study_item__study=study, pk=int(reexplanation_id)
        )
    except (Reexplanation.DoesNotExist, ValueError, TypeError):
        raise Http404("No such re-explanation in this study") from None


def reexplanation_get_for_participant(*, user, study: Study, reexplanation_id) -> Reexplanation:
    """The participant's own re-explanation of ``study`` (a study of the caller's project);
    another participant's is 403 (a member learns nothing from the refusal: ids are opaque)."""
    r = _reexplanation(study=study, reexplanation_id=reexplanation_id)
    if r.participant_id != user.pk:
        raise PermissionDenied("This re-explanation is not yours.")
    return r


def reexplanation_get_for_judge(*, user, study: Study, reexplanation_id) -> Reexplanation:
    """A re-explanation the user has claimed (or judged) as its judge; 403 otherwise."""
    r = _reexplanation(study=study, reexplanation_id=reexplanation_id)
    if r.judge_id != user.pk:
        raise PermissionDenied("This re-explanation is not given to you to judge.")
    return r


def member_roles(*, project: Project, user) -> set[str]:
    return set(Membership.objects.filter(project=project, user=user, is_active=True).values_list("role", flat=True))


def involved_ids(study_item: StudyItem) -> set[int]:
    """Everyone who may not judge or adjudicate the item: who wrote or saw the reference, and the
    re-explainers (they would judge their own work)."""
    ids = set(study_item.blocked)
    ids.update(Reexplanation.objects.filter(study_item=study_item).values_list("participant_id", flat=True))
    return ids


def judges_of(study_item: StudyItem) -> set[int]:
    return set(
        Reexplanation.objects.filter(study_item=study_item, judge__isnull=False).values_list("judge_id", flat=True)
    )


# ---------------------------------------------------------------- population


@dataclass
class Candidate:
    item_id: int
    annotation_id: int
    reference: str
    stratum: str
    label: str
    seen_by: set[int]


def study_fields_check(*, project: Project, reference_field: str, strata_fields: list[str]) -> None:
    """Invalid naming the field when the reference field is not a text field of an earlier
    stage, or a stratum field is not in the schema."""
    schema = project.get_schema()
    spec = schema.by_name.get(reference_field)
    if spec is None or spec["type"] != "text":
        texts = [s["name"] for s in schema.fields if s["type"] == "text"]
        raise Invalid(
            "The reference must be a text field of the schema.",
            errors={"reference_field": f"one of {', '.join(texts) or '(the schema has no text field)'}"},
        )
    bad = [name for name in strata_fields if name not in schema.by_name or name == reference_field]
    if bad:
        raise Invalid(
            "Stratify over fields of the schema (not the reference itself).",
            errors={"strata_fields": f"{', '.join(bad)}: not a field to stratify over"},
        )
    if len(set(strata_fields)) != len(strata_fields) or len(strata_fields) > 4:
        raise Invalid("Choose up to four different strata fields.", errors={"strata_fields": "up to four, no repeats"})


def default_strata(project: Project) -> list[str]:
    names = project.get_schema().by_name
    return [n for n in DEFAULT_STRATA if n in names]


def study_population(*, project: Project, reference_field: str, strata_fields: list[str]) -> list[Candidate]:
    """Items a study may sample, by item id: not excluded, with a submitted, non-empty reference
    in the stage that holds ``reference_field`` (the first such annotation is the reference, as
    in the release's references). Strata values come from the stage holding each field."""
    study_fields_check(project=project, reference_field=reference_field, strata_fields=strata_fields)
    schema = project.get_schema()
    workflow = project.get_workflow()
    try:
        ref_stage = workflow.stage_of_field(reference_field).index
        field_stage = {name: workflow.stage_of_field(name).index for name in strata_fields}
    except (StopIteration, SchemaError):  # pragma: no cover - every field belongs to a stage
        raise Invalid("A field belongs to no workflow stage.") from None
    # Stages whose page shows the reference stage's values: their workers saw the reference.
    showing = {ref_stage} | {s.index for s in workflow.stages if ref_stage in s.show_stages}
    rows = (
        Annotation.objects.filter(item__project=project, kind=Annotation.Kind.ANNOTATION)
        .exclude(item__stage=Stage.EXCLUDED)
        .order_by("item_id", "first_submitted_at", "id")
        .values_list("id", "item_id", "annotator_id", "stage", "status", "values")
    )
    seen: dict[int, set[int]] = {}
    first: dict[tuple[int, int], tuple[int, dict]] = {}
    for ann_id, item_id, annotator_id, stage, status, values in rows.iterator(chunk_size=2000):
        if stage in showing:
            seen.setdefault(item_id, set()).add(annotator_id)
        if status != Annotation.Status.SUBMITTED or (item_id, stage) in first:
            continue
        reference = (values or {}).get(reference_field)
        if stage == ref_stage and not (isinstance(reference, str) and reference.strip()):
            continue  # an empty reference: a later submitted one of the stage may hold it
        first[(item_id, stage)] = (ann_id, values or {})
    for item_id, reviewer_id in AdjudicationTask.objects.filter(
        item__project=project, reviewer__isnull=False
    ).values_list("item_id", "reviewer_id"):
        seen.setdefault(item_id, set()).add(reviewer_id)
    for item_id, judge_id, adjudicator_id in StudyItem.objects.filter(study__project=project).values_list(
        "item_id", "reexplanations__judge_id", "adjudicated_by_id"
    ):
        seen.setdefault(item_id, set()).update(x for x in (judge_id, adjudicator_id) if x)
    out = []
    for (item_id, stage), (ann_id, values) in first.items():
        if stage != ref_stage:
            continue
        reference = values[reference_field]
        keys, labels = [], []
        for name in strata_fields:
            src = values if field_stage[name] == ref_stage else first.get((item_id, field_stage[name]), (0, {}))[1]
            spec = schema.by_name[name]
            text = schema.type_of(name).display_text(spec, src.get(name))
            keys.append(f"{name}={text}")
            labels.append(text)
        out.append(
            Candidate(
                item_id=item_id,
                annotation_id=ann_id,
                reference=reference,
                stratum="|".join(keys) or "all",
                label=" × ".join(labels) or "all items",
                seen_by=seen.get(item_id, set()),
            )
        )
    out.sort(key=lambda c: c.item_id)
    return out


def saw_reference(*, user, study_item: StudyItem) -> bool:
    """Did ``user`` write or see the item's reference (now, not only when it was drawn)?"""
    if user.pk in study_item.blocked:
        return True
    project = study_item.study.project
    workflow = project.get_workflow()
    ref_stage = workflow.stage_of_field(study_item.study.reference_field).index
    showing = {ref_stage} | {s.index for s in workflow.stages if ref_stage in s.show_stages}
    if Annotation.objects.filter(item_id=study_item.item_id, annotator=user, stage__in=showing).exists():
        return True
    if AdjudicationTask.objects.filter(item_id=study_item.item_id, reviewer=user).exists():
        return True
    # Judges and adjudicators of the same item in another study have read its reference.
    return (
        StudyItem.objects.filter(item_id=study_item.item_id)
        .exclude(pk=study_item.pk)
        .filter(Q(reexplanations__judge=user) | Q(adjudicated_by=user))
        .exists()
    )


def eligible_participants(*, study_item: StudyItem):
    """Active members who may re-explain the item: a participant role, never the reference's
    writer or anyone who saw it, not already one of its re-explainers."""
    project = study_item.study.project
    taken = Reexplanation.objects.filter(study_item=study_item).values("participant_id")
    users = (
        get_user_model()
        .objects.filter(
            memberships__project=project, memberships__is_active=True, memberships__role__in=PARTICIPANT_ROLES
        )
        .exclude(pk__in=taken)
        .exclude(pk__in=study_item.blocked)
        .distinct()
        .order_by("username")
    )
    return [u for u in users if not saw_reference(user=u, study_item=study_item)]


# ---------------------------------------------------------------- pages


@dataclass(frozen=True)
class ParticipantWorkspace:
    """Everything a re-explainer's page and endpoint get (see module doc)."""

    reexplanation_id: int
    text: str
    version: int
    submitted: bool
    width: int
    height: int


def participant_workspace(*, reexplanation: Reexplanation) -> ParticipantWorkspace:
    item = reexplanation.study_item.item
    return ParticipantWorkspace(
        reexplanation_id=reexplanation.pk,
        text=reexplanation.text,
        version=reexplanation.version,
        submitted=reexplanation.status == Reexplanation.Status.SUBMITTED,
        width=item.width,
        height=item.height,
    )


def participant_queue(*, study: Study, user) -> dict:
    mine = Reexplanation.objects.filter(study_item__study=study, participant=user)
    return {
        "open": list(mine.filter(status=Reexplanation.Status.ASSIGNED).order_by("assigned_at", "id")),
        "submitted": mine.filter(status=Reexplanation.Status.SUBMITTED).count(),
    }


def judge_queue(*, study: Study, user) -> dict:
    mine = Reexplanation.objects.filter(study_item__study=study, judge=user)
    return {"open": list(mine.filter(verdict="")), "judged": mine.exclude(verdict="").count()}


def adjudication_open(*, study: Study, user) -> list[StudyItem]:
    """Items in adjudication that ``user`` may decide (not involved, not one of their judges)."""
    out = []
    for si in (
        StudyItem.objects.filter(study=study, status=StudyItem.Status.ADJUDICATION, removed_at__isnull=True)
        .select_related("study__project")
        .order_by("id")
    ):
        if user.pk not in involved_ids(si) and user.pk not in judges_of(si):
            out.append(si)
    return out


def study_items_for_lead(*, study: Study):
    return (
        StudyItem.objects.filter(study=study)
        .select_related("item")
        .prefetch_related("reexplanations__participant", "reexplanations__judge")
        .order_by("stratum", "item_id")
    )


def current_references(*, study: Study, study_items) -> dict[int, str]:
    """{study item id: the reference's current text} (after any revision), in one query."""
    by_ann = dict(
        Annotation.objects.filter(pk__in=[si.reference_annotation_id for si in study_items]).values_list("pk", "values")
    )
    return {
        si.pk: (by_ann.get(si.reference_annotation_id) or {}).get(study.reference_field) or "" for si in study_items
    }


# ---------------------------------------------------------------- report


def study_counts(*, study: Study) -> dict:
    counts = dict(
        StudyItem.objects.filter(study=study).values_list("status").annotate(n=Count("id")).order_by("status")
    )
    return {s.value: counts.get(s.value, 0) for s in StudyItem.Status}


def study_report(*, study: Study) -> dict:
    """The study's figures (MemeBench A.2: "98.0% of references fully or partially compatible ...
    3 revisions and 0 removals"). Shares are over decided items with Wilson 95% intervals; a
    conflict is an item whose two judge verdicts differ. No timestamps and no person's name: the
    report goes into the release as it is (deterministic for the same decisions)."""
    items = list(
        StudyItem.objects.filter(study=study).prefetch_related("reexplanations").order_by("stratum", "item_id")
    )
    per_stratum: dict[str, dict] = {}
    verdicts = {v.value: 0 for v in Verdict}
    judge_verdicts = {v.value: 0 for v in Verdict}
    conflicts = adjudicated = 0
    rows = []
    for si in items:
        judged = [r.verdict for r in si.reexplanations.all() if r.verdict]
        for v in judged:
            judge_verdicts[v] += 1
        conflict = len(judged) == 2 and judged[0] != judged[1]
        conflicts += conflict
        adjudicated += si.verdict_source == "adjudicated"
        s = per_stratum.setdefault(
            si.stratum, {"key": si.stratum, "label": si.stratum_label, "sampled": 0, "decided": 0, "c": 0, "f": 0}
        )
        s["sampled"] += 1
        if si.verdict:
            verdicts[si.verdict] += 1
            s["decided"] += 1
            s["c"] += si.verdict in COMPATIBLE
            s["f"] += si.verdict == Verdict.FULLY
        rows.append(
            {
                "item_id": si.item_id,
                "stratum": si.stratum,
                "status": si.status,
                "judge_verdicts": [r.verdict or None for r in sorted(si.reexplanations.all(), key=lambda r: r.slot)],
                "conflict": conflict,
                "verdict": si.verdict or None,
                "verdict_source": si.verdict_source or None,
                "revisions": si.revisions,
                "removed": bool(si.removed_at),
            }
        )
    decided = sum(verdicts.values())
    compatible = verdicts[Verdict.FULLY] + verdicts[Verdict.PARTIALLY]
    removed = [si for si in items if si.removed_at]
    by_reason: dict[str, int] = {}
    for si in removed:
        by_reason[si.removed_reason] = by_reason.get(si.removed_reason, 0) + 1
    return {
        "format": "concord-independence-study",
        "study": {
            "id": study.pk,
            "name": study.name,
            "status": study.status,
            "reference_field": study.reference_field,
            "strata_fields": list(study.strata_fields),
            "sample_size_asked": study.sample_size,
            "seed": study.seed,
            "eligible_items": study.eligible,
            "allocation": "proportional to stratum size, largest remainder, at least one per non-empty stratum "
            "when the size allows; seeded shuffle inside each stratum",
            "protocol": "two participants who did not write or see the reference re-explain each item from the "
            "image only; a third person judges each re-explanation against the reference as fully, partially "
            "or not compatible; when an item's two verdicts differ a lead or reviewer not otherwise involved "
            "adjudicates the item's verdict, otherwise the agreed verdict stands",
        },
        "sampled": len(items),
        "decided": decided,
        "progress": study_counts(study=study),
        "verdicts": verdicts,
        "judge_verdicts": judge_verdicts,
        "compatible": {**share(compatible, decided), "definition": "fully or partially compatible"},
        "fully": share(verdicts[Verdict.FULLY], decided),
        "ci_method": "Wilson score interval, 95%",
        "strata": [
            {
                "key": s["key"],
                "label": s["label"],
                "sampled": s["sampled"],
                "decided": s["decided"],
                "compatible": share(s["c"], s["decided"]),
                "fully": share(s["f"], s["decided"]),
            }
            for s in sorted(per_stratum.values(), key=lambda s: s["key"])
        ],
        "conflicts": {
            "items": conflicts,
            "adjudicated": adjudicated,
            "open": sum(1 for si in items if si.status == StudyItem.Status.ADJUDICATION),
            "definition": "the two judge verdicts of an item differ",
        },
        "revisions": {
            "count": sum(si.revisions for si in items),
            "items": sorted(si.item_id for si in items if si.revisions),
        },
        "removals": {
            "count": len(removed),
            "items": sorted(si.item_id for si in removed),
            "by_reason": dict(sorted(by_reason.items())),
        },
        "items": rows,
    }


def studies_for_release(*, project: Project) -> list[dict]:
    """Reports of the project's confirmed studies (open or closed), oldest first."""
    return [
        study_report(study=s)
        for s in Study.objects.filter(project=project).exclude(status=Study.Status.DRAFT).order_by("created_at", "id")
    ]
