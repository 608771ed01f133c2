"""Write paths of the reference-independence study (studies.models has the protocol and the
states). Every function here is one transaction; the ones that change a study item's state
lock its row (``select_for_update``) first, so two submits or two verdicts that complete an
item cannot both miss (or both take) the step to the next state.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from adjudication.models import AdjudicationTask, GoldRecord
from adjudication.services import gold_correct, history_record
from annotation.models import Annotation, AnnotationRevision, Assignment
from core.errors import Conflict, Forbidden, Invalid, StaleVersion
from projects.models import Item, Project, Role, Stage
from studies import sampling
from studies.models import SLOTS, Reexplanation, Study, StudyItem, Verdict
from studies.selectors import (
    ADJUDICATOR_ROLES,
    DEFAULT_REFERENCE,
    JUDGE_ROLES,
    PARTICIPANT_ROLES,
    involved_ids,
    judges_of,
    member_roles,
    saw_reference,
    study_population,
)

MAX_SAMPLE = 5000
MAX_TEXT = 10_000
MAX_NOTE = 2000
#: Reasons a lead gives for removing an item after the study (MemeBench QC's reasons); "other"
#: needs a note.
REMOVAL_REASONS = {
    "incompatible": "Reference not recoverable from the meme",
    "ambiguity": "Ambiguous meme",
    "image_quality": "Image quality",
    "safety": "Safety",
    "other": "Other",
}
#: The construction step a study's removal is counted under in the datasheet.
STUDY_STEP = "independence study"


# ---------------------------------------------------------------- drawing


def _int(value, *, name: str, lo: int, hi: int) -> int:
    try:
        out = int(str(value).strip())
    except (TypeError, ValueError):
        raise Invalid(f"{name.replace('_', ' ').capitalize()} must be a whole number.", errors={name: "a whole number"})
    if not lo <= out <= hi:
        raise Invalid(
            f"{name.replace('_', ' ').capitalize()} must be from {lo:,} to {hi:,}.", errors={name: f"{lo}..{hi}"}
        )
    return out


def study_draw(
    *,
    project: Project,
    lead,
    name: str = "",
    sample_size=150,
    seed=0,
    strata_fields: list[str] | None = None,
    reference_field: str = DEFAULT_REFERENCE,
) -> Study:
    """Draw a stratified sample into a new draft study (its strata table is shown before the
    lead confirms it). Only items with a reference that are not excluded can be drawn. Raises
    Invalid naming the field: bad size or seed, unknown fields, fewer eligible items than asked."""
    size = _int(sample_size, name="sample_size", lo=1, hi=MAX_SAMPLE)
    seed = _int(seed, name="seed", lo=-(2**31), hi=2**31 - 1)
    strata_fields = list(strata_fields if strata_fields is not None else ())
    name = (name or "").strip()[:200] or "Reference-independence study"
    population = study_population(project=project, reference_field=reference_field, strata_fields=strata_fields)
    if not population:
        raise Invalid(
            "No item can be sampled: none has a submitted reference (and is not excluded).",
            errors={"sample_size": "no eligible item yet"},
        )
    if size > len(population):
        raise Invalid(
            f"Only {len(population):,} items have a reference and are not excluded; ask for at most that many.",
            errors={"sample_size": f"at most {len(population)}"},
        )
    by_stratum: dict[str, list[int]] = {}
    for c in population:
        by_stratum.setdefault(c.stratum, []).append(c.item_id)
    drawn = sampling.draw(by_stratum, size, seed)
    labels = {c.stratum: c.label for c in population}
    chosen = {i for ids in drawn.values() for i in ids}
    with transaction.atomic():
        study = Study.objects.create(
            project=project,
            name=name,
            reference_field=reference_field,
            strata_fields=strata_fields,
            sample_size=size,
            seed=seed,
            eligible=len(population),
            strata=[
                {"key": k, "label": labels[k], "population": len(by_stratum[k]), "sampled": len(drawn.get(k, []))}
                for k in sorted(by_stratum)
            ],
            created_by=lead,
        )
        StudyItem.objects.bulk_create(
            StudyItem(
                study=study,
                item_id=c.item_id,
                stratum=c.stratum[:300],
                stratum_label=c.label[:500],
                reference_annotation_id=c.annotation_id,
                reference_text=c.reference,
                blocked=sorted(c.seen_by),
            )
            for c in population
            if c.item_id in chosen
        )
    return study


def study_confirm(*, study: Study, lead) -> Study:
    """The lead confirms the drawn sample: participants may start."""
    updated = Study.objects.filter(pk=study.pk, status=Study.Status.DRAFT).update(
        status=Study.Status.OPEN, opened_at=timezone.now()
    )
    if not updated:
        raise Conflict("This study is not a draft any more: it was already confirmed.")
    history_record(project=study.project, item=None, kind="study:opened", actor=lead, new={"study": study.pk})
    study.refresh_from_db()
    return study


def study_discard(*, study: Study, lead) -> None:
    """A draft the lead does not want (e.g. to draw again with other settings) is deleted."""
    deleted, _ = Study.objects.filter(pk=study.pk, status=Study.Status.DRAFT).delete()
    if not deleted:
        raise Conflict("Only a draft can be discarded; a confirmed study is kept (close it instead).")


def study_close(*, study: Study, lead) -> Study:
    """No more re-explanations, verdicts or adjudications; revisions and removals still allowed."""
    updated = Study.objects.filter(pk=study.pk, status=Study.Status.OPEN).update(
        status=Study.Status.CLOSED, closed_at=timezone.now()
    )
    if not updated:
        raise Conflict("Only an open study can be closed.")
    study.refresh_from_db()
    return study


def _require_open(study: Study) -> None:
    if study.status != Study.Status.OPEN:
        raise Conflict(
            "This study is not open: "
            + ("the lead has not confirmed its sample yet." if study.status == Study.Status.DRAFT else "it is closed.")
        )


def _lock(study_item: StudyItem) -> StudyItem:
    return StudyItem.objects.select_for_update(of=("self",)).select_related("study__project").get(pk=study_item.pk)


# ---------------------------------------------------------------- re-explaining


def _check_participant(*, study_item: StudyItem, user) -> None:
    roles = member_roles(project=study_item.study.project, user=user)
    if not roles & set(PARTICIPANT_ROLES):
        raise Forbidden("Only annotators and reviewers of the project take part as re-explainers.")
    if saw_reference(user=user, study_item=study_item):
        raise Forbidden("This person wrote or saw the item's reference: they cannot re-explain it blind.")


def _take_slot(*, locked: StudyItem, user, assigned_by) -> Reexplanation:
    """Caller holds the study item's row lock."""
    if locked.removed_at or locked.status != StudyItem.Status.REEXPLAINING:
        raise Conflict("This item no longer needs re-explanations.")
    held = dict(Reexplanation.objects.filter(study_item=locked).values_list("slot", "participant_id"))
    if user.pk in held.values():
        raise Conflict("This person already re-explains this item.")
    free = [s for s in SLOTS if s not in held]
    if not free:
        raise Conflict("Both re-explanations of this item are taken.")
    try:
        with transaction.atomic():
            return Reexplanation.objects.create(
                study_item=locked, slot=free[0], participant=user, assigned_by=assigned_by
            )
    except IntegrityError:
        raise Conflict("This item's re-explanations changed meanwhile: try again.") from None


def reexplanation_assign(*, study_item: StudyItem, participant, lead) -> Reexplanation:
    """The lead gives one of the item's two re-explanations to a project member (never the
    reference's writer or anyone who saw it)."""
    _require_open(study_item.study)
    _check_participant(study_item=study_item, user=participant)
    with transaction.atomic():
        locked = _lock(study_item)
        return _take_slot(locked=locked, user=participant, assigned_by=lead)


def reexplanation_claim_next(*, study: Study, participant) -> Reexplanation | None:
    """The participant's open re-explanation, else a free slot of an item they may re-explain
    (items with one re-explanation first, to finish items), or None when there is none.

    Locks: candidate items one at a time with ``skip_locked``; a locked row is another
    participant's claim in progress and is passed over, not waited for."""
    _require_open(study)
    mine = (
        Reexplanation.objects.filter(study_item__study=study, participant=participant, status="assigned")
        .order_by("assigned_at", "id")
        .first()
    )
    if mine is not None:
        return mine
    roles = member_roles(project=study.project, user=participant)
    if not roles & set(PARTICIPANT_ROLES):
        raise Forbidden("Only annotators and reviewers of the project take part as re-explainers.")
    candidates = (
        StudyItem.objects.filter(study=study, status=StudyItem.Status.REEXPLAINING, removed_at__isnull=True)
        .exclude(blocked__contains=[participant.pk])
        .exclude(reexplanations__participant=participant)
        .annotate(n=Count("reexplanations"))
        .filter(n__lt=len(SLOTS))
        .order_by("-n", "id")
        .values_list("pk", flat=True)
    )
    for pk in candidates[:200]:
        with transaction.atomic():
            locked = (
                StudyItem.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("study__project")
                .filter(pk=pk)
                .first()
            )
            if locked is None or saw_reference(user=participant, study_item=locked):
                continue
            try:
                return _take_slot(locked=locked, user=participant, assigned_by=None)
            except Conflict:
                continue
    return None


def reexplanation_save(*, reexplanation: Reexplanation, participant, text, version, submit: bool = False):
    """Save the participant's text (a draft, or ``submit``). A stale ``version`` -> 409 with
    nothing overwritten. The second submission of an item moves it on to judging."""
    if reexplanation.participant_id != participant.pk:
        raise Forbidden("This is not your re-explanation.")
    if not isinstance(text, str):
        raise Invalid("The re-explanation must be text.", errors={"text": "text"})
    text = text.replace("\r\n", "\n").strip()
    if len(text) > MAX_TEXT:
        raise Invalid(f"Keep the re-explanation under {MAX_TEXT:,} characters.", errors={"text": "too long"})
    if submit and not text:
        raise Invalid("Write your explanation of the meme before submitting.", errors={"text": "required"})
    try:
        version = int(version)
    except (TypeError, ValueError):
        raise Invalid("The form lost its version number: reload the page.", errors={"version": "a number"}) from None
    _require_open(reexplanation.study_item.study)
    with transaction.atomic():
        locked_item = _lock(reexplanation.study_item)
        row = Reexplanation.objects.select_for_update().get(pk=reexplanation.pk)
        if row.status == Reexplanation.Status.SUBMITTED:
            raise Conflict("You already submitted this re-explanation.")
        if locked_item.removed_at:
            raise Conflict("The lead removed this item: it needs no re-explanation any more.")
        if row.version != version:
            raise StaleVersion("This re-explanation was saved elsewhere (another tab?). Reload; copy your text first.")
        row.text = text
        row.version += 1
        fields = ["text", "version"]
        if submit:
            row.status, row.submitted_at = Reexplanation.Status.SUBMITTED, timezone.now()
            fields += ["status", "submitted_at"]
        row.save(update_fields=fields)
        if submit and (
            Reexplanation.objects.filter(study_item=locked_item, status=Reexplanation.Status.SUBMITTED).count()
            == len(SLOTS)
        ):
            StudyItem.objects.filter(pk=locked_item.pk).update(status=StudyItem.Status.JUDGING)
    return row


def reexplanation_release(*, reexplanation: Reexplanation, user) -> None:
    """The participant gives back, or a lead takes back, an unsubmitted re-explanation."""
    project = reexplanation.study_item.study.project
    if reexplanation.participant_id != user.pk and Role.LEAD not in member_roles(project=project, user=user):
        raise Forbidden("Only the participant or a lead can give this re-explanation back.")
    deleted, _ = Reexplanation.objects.filter(pk=reexplanation.pk, status=Reexplanation.Status.ASSIGNED).delete()
    if not deleted:
        raise Conflict("A submitted re-explanation cannot be given back.")


# ---------------------------------------------------------------- judging


def _judge_timeout(project: Project) -> timedelta:
    return timedelta(minutes=project.claim_timeout_minutes or 60)


def judgement_claim_next(*, study: Study, judge) -> Reexplanation | None:
    """The judge's claimed, unjudged re-explanation, else the first one they may judge (an item
    both participants submitted; the judge neither wrote nor saw its reference and is not one of
    its re-explainers), claimed for the project's claim timeout.

    Locks: the re-explanation row, ``skip_locked`` (another judge's claim in progress is passed over)."""
    _require_open(study)
    roles = member_roles(project=study.project, user=judge)
    if not roles & set(JUDGE_ROLES):
        raise Forbidden("Your role in this project does not let you judge re-explanations.")
    mine = Reexplanation.objects.filter(study_item__study=study, judge=judge, verdict="").order_by("id").first()
    if mine is not None:
        return mine
    now = timezone.now()
    stale = now - _judge_timeout(study.project)
    own_items = Reexplanation.objects.filter(study_item__study=study, participant=judge).values("study_item_id")
    base = (
        Reexplanation.objects.filter(
            study_item__study=study,
            study_item__status=StudyItem.Status.JUDGING,
            study_item__removed_at__isnull=True,
            status=Reexplanation.Status.SUBMITTED,
            verdict="",
        )
        .filter(Q(judge__isnull=True) | Q(judge_claimed_at__lt=stale))
        .exclude(study_item__blocked__contains=[judge.pk])
        .exclude(study_item_id__in=own_items)
        .order_by("study_item_id", "slot")
    )
    for pk in base.values_list("pk", flat=True)[:200]:
        with transaction.atomic():
            row = (
                Reexplanation.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("study_item__study__project")
                .filter(pk=pk, verdict="")
                .filter(Q(judge__isnull=True) | Q(judge_claimed_at__lt=stale))
                .first()
            )
            if row is None or saw_reference(user=judge, study_item=row.study_item):
                continue
            row.judge, row.judge_claimed_at = judge, now
            row.save(update_fields=["judge", "judge_claimed_at"])
            return row
    return None


def judgement_submit(*, reexplanation: Reexplanation, judge, verdict: str, note: str = "") -> Reexplanation:
    """The judge's verdict on one re-explanation against the reference. When both of the item's
    re-explanations are judged: the same verdict -> the item is decided (agreed); different
    verdicts -> adjudication (a conflict)."""
    if verdict not in Verdict.values:
        raise Invalid(
            "Choose fully, partially or not compatible.", errors={"verdict": f"one of {', '.join(Verdict.values)}"}
        )
    note = (note or "").strip()
    if len(note) > MAX_NOTE:
        raise Invalid(f"Keep the note under {MAX_NOTE:,} characters.", errors={"note": "too long"})
    _require_open(reexplanation.study_item.study)
    with transaction.atomic():
        locked_item = _lock(reexplanation.study_item)
        row = Reexplanation.objects.select_for_update().get(pk=reexplanation.pk)
        if row.judge_id != judge.pk:
            raise Conflict(
                "This re-explanation is not claimed by you (your claim may have expired): open the next one."
            )
        if row.verdict:
            raise Conflict("You already judged this re-explanation.")
        if locked_item.removed_at or locked_item.status != StudyItem.Status.JUDGING:
            raise Conflict("This item is not being judged any more.")
        if judge.pk in involved_ids(locked_item):
            raise Forbidden("You wrote, saw or re-explained this item's reference: you cannot judge it.")
        row.verdict, row.verdict_note, row.judged_at = verdict, note, timezone.now()
        row.save(update_fields=["verdict", "verdict_note", "judged_at"])
        verdicts = list(
            Reexplanation.objects.filter(study_item=locked_item).exclude(verdict="").values_list("verdict", flat=True)
        )
        if len(verdicts) == len(SLOTS):
            if len(set(verdicts)) == 1:
                StudyItem.objects.filter(pk=locked_item.pk).update(
                    status=StudyItem.Status.DONE, verdict=verdicts[0], verdict_source="agreed"
                )
            else:
                StudyItem.objects.filter(pk=locked_item.pk).update(status=StudyItem.Status.ADJUDICATION)
    return row


def study_item_adjudicate(*, study_item: StudyItem, user, verdict: str, note: str = "") -> StudyItem:
    """A lead or reviewer who is not otherwise involved with the item (not its reference's
    writer or viewer, not a re-explainer, not one of its judges) sets the item's verdict."""
    if verdict not in Verdict.values:
        raise Invalid(
            "Choose fully, partially or not compatible.", errors={"verdict": f"one of {', '.join(Verdict.values)}"}
        )
    note = (note or "").strip()[:MAX_NOTE]
    roles = member_roles(project=study_item.study.project, user=user)
    if not roles & set(ADJUDICATOR_ROLES):
        raise Forbidden("Only leads and reviewers adjudicate study conflicts.")
    _require_open(study_item.study)
    with transaction.atomic():
        locked = _lock(study_item)
        if locked.status != StudyItem.Status.ADJUDICATION or locked.removed_at:
            raise Conflict("This item is not waiting for adjudication (already decided?).")
        if user.pk in involved_ids(locked) or user.pk in judges_of(locked):
            raise Forbidden(
                "You are involved with this item (reference, re-explanation or verdict): adjudication must be independent."
            )
        StudyItem.objects.filter(pk=locked.pk).update(
            status=StudyItem.Status.DONE,
            verdict=verdict,
            verdict_source="adjudicated",
            adjudicated_by=user,
            adjudicated_at=timezone.now(),
            adjudication_note=note,
        )
        locked.refresh_from_db()
    return locked


# ---------------------------------------------------------------- consequences


def _require_lead(project: Project, user) -> None:
    if Role.LEAD not in member_roles(project=project, user=user):
        raise Forbidden("Only a project lead can do this.")


def study_reference_revise(*, study_item: StudyItem, lead, text, note: str = "", expected: str | None = None):
    """The lead revises the item's reference after the study: the new text replaces the
    reference field's value in the annotation it came from (a new version of it, the old in its
    revisions and in the item's history), and in the item's current gold when it is gold
    (a new gold revision). Counted as one revision of the study. ``expected``: the text the
    lead's form was opened on; another one -> StaleVersion (nothing overwritten)."""
    project = study_item.study.project
    _require_lead(project, lead)
    if study_item.study.status == Study.Status.DRAFT:
        raise Conflict("Confirm the study before revising references from it.")
    if not isinstance(text, str) or not text.strip():
        raise Invalid("Write the revised reference.", errors={"text": "required"})
    text = text.replace("\r\n", "\n").strip()
    if len(text) > MAX_TEXT:
        raise Invalid(f"Keep the reference under {MAX_TEXT:,} characters.", errors={"text": "too long"})
    field = study_item.study.reference_field
    with transaction.atomic():
        locked = _lock(study_item)
        if locked.removed_at:
            raise Conflict("This item was removed: its reference is not revised any more.")
        if locked.reference_annotation_id is None:
            raise Conflict("The annotation holding this reference no longer exists.")
        item = Item.objects.select_for_update().get(pk=locked.item_id)
        ann = Annotation.objects.select_for_update().get(pk=locked.reference_annotation_id)
        old = (ann.values or {}).get(field)
        if expected is not None and expected.replace("\r\n", "\n").strip() != (old or "").strip():
            raise StaleVersion("The reference was changed meanwhile. Reload to see the current text.")
        if old == text:
            raise Invalid("The revised text is the same as the current reference.", errors={"text": "unchanged"})
        ann.values = {**ann.values, field: text}
        ann.version += 1
        ann.save(update_fields=["values", "version", "updated_at"])
        AnnotationRevision.objects.create(
            annotation=ann,
            version=ann.version,
            status=ann.status,
            values=ann.values,
            provenance=ann.provenance,
            saved_by=lead,
        )
        StudyItem.objects.filter(pk=locked.pk).update(revisions=locked.revisions + 1)
        note = (note or "").strip()[:MAX_NOTE]
        history_record(
            project=project,
            item=item,
            kind="study:revision",
            actor=lead,
            old={field: old},
            new={field: text, "study": locked.study_id, "annotation": ann.pk},
            note=note or "reference revised after the independence study",
        )
        gold = GoldRecord.objects.filter(item=item, is_current=True).first()
        if gold is not None and item.stage == Stage.GOLD and field in gold.values:
            values = dict(gold.values)
            current = values[field]
            if isinstance(current, list):
                ids = (gold.provenance.get(field) or {}).get("annotations") or []
                current = list(current)
                if ann.pk in ids and ids.index(ann.pk) < len(current):
                    current[ids.index(ann.pk)] = text
                values[field] = current
            else:
                values[field] = text
            gold_correct(
                item=item,
                values=values,
                provenance=gold.provenance,
                actor=lead,
                note=note or "reference revised after the independence study",
                kind="gold:study_revision",
            )
    locked.refresh_from_db()
    return locked


def study_item_remove(*, study_item: StudyItem, lead, reason: str, note: str = "") -> StudyItem:
    """The lead removes the item from the dataset after the study, with a reason: it leaves by
    the same path as a workflow flag (stage excluded, ``Item.excluded_reason``, an ``excluded``
    history event; the datasheet counts it by reason). Its open claims and adjudication tasks
    end. Counted as a removal of the study."""
    project = study_item.study.project
    _require_lead(project, lead)
    if study_item.study.status == Study.Status.DRAFT:
        raise Conflict("Confirm the study before removing items from it.")
    if reason not in REMOVAL_REASONS:
        raise Invalid("Choose a reason for the removal.", errors={"reason": f"one of {', '.join(REMOVAL_REASONS)}"})
    note = (note or "").strip()[:250]
    if reason == "other" and not note:
        raise Invalid("Say briefly why the item is removed.", errors={"note": "required for other"})
    text = f"independence study: {REMOVAL_REASONS[reason].lower()}" + (f": {note}" if note else "")
    with transaction.atomic():
        locked = _lock(study_item)
        item = Item.objects.select_for_update().get(pk=locked.item_id)
        if locked.removed_at or item.stage == Stage.EXCLUDED:
            raise Conflict("This item has already left the dataset.")
        old_stage = item.stage
        Item.objects.filter(pk=item.pk).update(stage=Stage.EXCLUDED, excluded_reason=text[:500])
        Assignment.objects.filter(item=item).delete()
        AdjudicationTask.objects.filter(item=item, status__in=["open", "claimed"]).update(
            status=AdjudicationTask.Status.CANCELLED
        )
        StudyItem.objects.filter(pk=locked.pk).update(removed_reason=text[:300], removed_at=timezone.now())
        history_record(
            project=project,
            item=item,
            kind="excluded",
            actor=lead,
            old={"stage": old_stage},
            # "flag" and "stage_name" as a workflow flag's event has them: the datasheet's
            # construction counts (exports) count the removal by reason and by the step.
            new={"reason": text[:500], "study": locked.study_id, "flag": reason, "stage_name": STUDY_STEP},
        )
    locked.refresh_from_db()
    return locked
