"""Saving an annotation: drafts, submissions (without routing: workflow.services does that),
skips. Locks: the item row lock of annotation.services.claims, held for the whole save.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.models import (
    Annotation,
    AnnotationRevision,
    Assignment,
    Kind,
    assignment_of,
)
from annotation.services.claims import _lock_item, _reclaim_locked, slots_of
from candidates.selectors import candidate_ids_for_annotator
from core.errors import Conflict, Invalid, NotFound, StaleVersion
from core.rows import alias_for, columns, fetch_rows, model_from_row, reverse_one_to_one_from_row, width
from projects.models import Item, Stage
from projects.presets import MEME3W_SKIP_REASONS, PRESETS
from projects.schema import Schema
from projects.services import skip_reasons_of

log = logging.getLogger(__name__)
Status = Annotation.Status

#: The default skip reasons (Meme3W's); a project offers its own (projects.services.skip_reasons_of).
SKIP_REASONS = [tuple(r) for r in MEME3W_SKIP_REASONS]
#: Every key any preset offers (the REST input's choices); a project accepts only its own.
SKIP_REASON_KEYS = {k for p in PRESETS.values() for k, _ in p.get("skip_reasons", [])}

MAX_VALUES_BYTES = 200_000
#: One save can add at most this much active time (the browser's clock is not trusted further).
MAX_ACTIVE_MS_PER_SAVE = 2 * 60 * 60 * 1000


class SlotTaken(Conflict):
    code = "slot_taken"


class ItemClosed(Conflict):
    code = "closed"


class NotAssigned(NotFound):
    code = "not_assigned"


@dataclass
class SaveResult:
    annotation: Annotation
    holds_slot: bool
    #: True when this was the item's N-th first submission: the caller (workflow) routes it.
    completed: bool = False
    #: Set by workflow.services.annotation_submit: where the item went (never sent to annotators).
    routed_to: str | None = None


# --------------------------------------------------------------------------- values


def _clean_draft_values(schema: Schema, values: Any) -> dict:
    if not isinstance(values, dict):
        raise Invalid("The annotation must be an object of fields.", errors={"__all__": "must be an object"})
    unknown = sorted(set(values) - set(schema.by_name))
    if unknown:
        raise Invalid(
            f"Unknown field(s): {', '.join(unknown)}", errors={"__all__": f"unknown field(s): {', '.join(unknown)}"}
        )
    errors = {}
    for name, value in values.items():
        err = schema.type_of(name).shape_error(schema.by_name[name], value) if value is not None else None
        if err:
            errors[name] = err
    if errors:
        raise Invalid("Some fields hold values of the wrong kind.", errors=errors)
    if len(json.dumps(values)) > MAX_VALUES_BYTES:
        raise Invalid("The annotation is too large.", errors={"__all__": "too large"})
    full = {**schema.absent_values(), **values}
    return schema.clear_hidden(full)


def _same_value(schema: Schema, name: str, a: Any, b: Any) -> bool:
    spec, ftype = schema.by_name[name], schema.type_of(name)
    try:
        if ftype.is_absent(spec, a) or ftype.is_absent(spec, b):
            return ftype.is_absent(spec, a) and ftype.is_absent(spec, b)
        return ftype.canonical(spec, a) == ftype.canonical(spec, b)
    except (TypeError, ValueError):
        return False


def _resolve_provenance(*, schema: Schema, annotation: Annotation, values: dict, provenance: Any) -> dict:
    """Browser provenance ({field: {"letter": "B"}}) -> stored {field: {letter, candidate_id, edited}}.

    The candidate id is resolved here, server side, from the letter the annotator saw; ``edited``
    is computed by comparing the saved value with that candidate's value, not taken from the
    browser (anchoring analysis needs a value that does not depend on client code).
    """
    if provenance in (None, {}):
        return {}
    if not isinstance(provenance, dict):
        raise Invalid("Provenance must be an object.", errors={"__all__": "bad provenance"})
    if annotation.kind == Kind.AUDIT:
        raise Invalid(
            "A blind audit has no candidates to take values from.", errors={"__all__": "no candidates in an audit"}
        )
    wanted = {}
    for name, entry in provenance.items():
        if name not in schema.by_name:
            raise Invalid(f"Unknown field {name!r} in provenance.", errors={"__all__": f"unknown field {name!r}"})
        letter = entry.get("letter") if isinstance(entry, dict) else None
        if letter is None:
            continue
        if not isinstance(letter, str) or len(letter) > 3:
            raise Invalid("Bad candidate letter.", errors={name: "bad candidate letter"})
        wanted[name] = letter
    if not wanted:
        return {}
    shown = candidate_ids_for_annotator(item=annotation.item, user=annotation.annotator)
    ids: dict[str, int | None] = {}
    previous = annotation.provenance or {}
    out = {}
    for name, letter in wanted.items():
        if letter not in shown:
            raise Invalid(f"There is no candidate {letter}.", errors={name: f"there is no candidate {letter}"})
        current_id, cand = shown[letter]
        if letter not in ids:
            old = previous.get(name) or {}
            ids[letter] = (
                old.get("candidate_id") if old.get("letter") == letter and old.get("candidate_id") else current_id
            )
        cand_value = cand.fields.get(name, schema.type_of(name).absent(schema.by_name[name]))
        out[name] = {
            "letter": letter,
            "candidate_id": ids[letter],
            "edited": not _same_value(schema, name, values.get(name), cand_value),
        }
    return out


def _active_ms(time_spent_ms: Any, *, annotation: Annotation, now) -> int:
    """Clamp the browser's active-time delta: non-negative, and no more than the wall time since the last save."""
    try:
        delta = int(time_spent_ms or 0)
    except (TypeError, ValueError):
        raise Invalid("time_spent_ms must be an integer.", errors={"__all__": "bad time_spent_ms"}) from None
    since = annotation.updated_at or annotation.created_at or now
    wall = int((now - since).total_seconds() * 1000) + 5_000
    return max(0, min(delta, wall, MAX_ACTIVE_MS_PER_SAVE))


# --------------------------------------------------------------------------- saves


#: The item's annotations of one kind and stage, each with its assignment (LEFT JOIN: an
#: annotation may have none). Written out (core.rows): every save reads it.
_ANNOTATIONS_WITH_ASSIGNMENT = (
    f'SELECT {columns(Annotation, "a")}, {columns(Assignment, "s")} FROM "{Annotation._meta.db_table}" a'
    f' LEFT OUTER JOIN "{Assignment._meta.db_table}" s ON s."annotation_id" = a."id"'
    ' WHERE a."item_id" = %s AND a."kind" = %s AND a."stage" = %s'
)


def _annotations_with_assignment(*, item_id: int, kind: str, stage: int) -> list[Annotation]:
    """As ``Annotation.objects.filter(item_id=, kind=, stage=).select_related("assignment")``."""
    alias = alias_for(Annotation)
    out = []
    for row in fetch_rows(alias, _ANNOTATIONS_WITH_ASSIGNMENT, [item_id, kind, stage]):
        annotation = model_from_row(Annotation, row, alias=alias)
        reverse_one_to_one_from_row(annotation, "assignment", row, start=width(Annotation), alias=alias)
        out.append(annotation)
    return out


def _load_for_write(*, annotator, item: Item, kind: str):
    """Lock the item, then read its annotations of ``kind`` in one query: the caller's (with its
    assignment) and the (annotator, status, assignment status, expiry) rows of all of them.

    ``item`` may be a reference (annotation.selectors.item_reference: id + access-checked
    project): the item is locked within its project, and 404 unless the caller holds it."""
    locked = _lock_item(item.pk, project_id=item.project_id)
    if locked is None:
        # Within a project, a missing item and another's read alike: existence is not revealed.
        raise NotAssigned("This item is not assigned to you.")
    stage = locked.workflow_stage if kind == Kind.ANNOTATION else 0
    annotation, rows = None, []
    for a in _annotations_with_assignment(item_id=locked.pk, kind=kind, stage=stage):
        assignment = assignment_of(a)
        rows.append(
            (
                a.annotator_id,
                a.status,
                assignment.status if assignment else None,
                assignment.expires_at if assignment else None,
            )
        )
        if a.annotator_id == annotator.pk:
            annotation = a
    if annotation is None:
        if Annotation.objects.filter(item=locked, kind=kind, annotator=annotator).exists():
            raise ItemClosed("This item has moved on to its next stage: your part of it can no longer be changed.")
        raise NotAssigned("This item is not assigned to you.")
    annotation.item = locked
    annotation.annotator = annotator
    return annotation, rows


def _check_writable(annotation: Annotation, version: Any) -> None:
    if annotation.status == Status.SKIPPED:
        raise ItemClosed("You skipped this item; it is no longer yours to annotate.")
    if annotation.kind == Kind.ANNOTATION and annotation.item.stage != Stage.ANNOTATING:
        raise ItemClosed("This item has left annotation (it is in adjudication or done): it can no longer be changed.")
    if isinstance(version, bool) or not isinstance(version, int):
        raise Invalid("A version number is required.", errors={"__all__": "version must be an integer"})
    if version != annotation.version:
        raise StaleVersion(
            f"This annotation was saved elsewhere (another tab or window) since you loaded it "
            f"(your version {version}, saved version {annotation.version}). Nothing was overwritten: "
            "reload the page to continue from the saved version; your edits stay in this browser."
        )


def _write(
    *,
    annotation: Annotation,
    annotator,
    now,
    values_field: str,
    values: dict,
    provenance: dict,
    active_ms: int,
    status: str,
    extra: dict | None = None,
) -> None:
    annotation.version += 1
    setattr(annotation, values_field, values)
    annotation.provenance = provenance
    annotation.time_spent_ms += active_ms
    annotation.status = status
    annotation.schema_version = annotation.item.project.schema_version
    annotation.guideline_version = annotation.item.project.guideline_version
    annotation.updated_at = now
    fields = {
        values_field: values,
        "version": annotation.version,
        "provenance": provenance,
        "time_spent_ms": annotation.time_spent_ms,
        "status": status,
        "schema_version": annotation.schema_version,
        "guideline_version": annotation.guideline_version,
        "updated_at": now,
        **(extra or {}),
    }
    for k, v in (extra or {}).items():
        setattr(annotation, k, v)
    Annotation.objects.filter(pk=annotation.pk).update(**fields)
    AnnotationRevision.objects.create(
        annotation=annotation,
        version=annotation.version,
        status=status,
        values=values,
        provenance=provenance,
        saved_by=annotator,
    )


def annotation_save_draft(
    *,
    annotator,
    item: Item,
    values: Any,
    version: Any,
    provenance: Any = None,
    time_spent_ms: Any = 0,
    kind: str = Kind.ANNOTATION,
) -> SaveResult:
    """Autosave. Never refuses work for lack of a slot: the draft is kept and the result says
    whether the annotator still holds a slot (see annotation.models). Hidden fields are cleared.

    A submitted annotation being revised keeps its submitted ``values``; the edits go to
    ``draft_values`` until submitted again.
    """
    now = timezone.now()
    with transaction.atomic():
        annotation, rows = _load_for_write(annotator=annotator, item=item, kind=kind)
        _check_writable(annotation, version)
        schema = annotation.item.project.get_workflow().stage_schema(annotation.stage)
        clean = _clean_draft_values(schema, values)
        prov = _resolve_provenance(schema=schema, annotation=annotation, values=clean, provenance=provenance)
        holds = True
        if kind == Kind.ANNOTATION:
            holds = _reclaim_locked(annotation=annotation, rows=rows, now=now)
        target = "draft_values" if annotation.status == Status.SUBMITTED else "values"
        _write(
            annotation=annotation,
            annotator=annotator,
            now=now,
            values_field=target,
            values=clean,
            provenance=prov,
            active_ms=_active_ms(time_spent_ms, annotation=annotation, now=now),
            status=annotation.status,
        )
    return SaveResult(annotation=annotation, holds_slot=holds)


def annotation_submit_record(
    *,
    annotator,
    item: Item,
    values: Any,
    version: Any,
    provenance: Any = None,
    time_spent_ms: Any = 0,
    kind: str = Kind.ANNOTATION,
) -> SaveResult:
    """Validate (hidden fields cleared first) and submit the annotation.

    Routing is not done here: the result says ``completed`` when this was the item's N-th
    submission, and workflow.services.annotation_submit routes the item in the same transaction
    (the caller's), under the item lock taken here, so the N-th submission and the item's move
    out of annotation commit together. Raises Invalid (per-field errors), StaleVersion,
    SlotTaken or ItemClosed; nothing is written then.
    """
    now = timezone.now()
    with transaction.atomic():
        annotation, rows = _load_for_write(annotator=annotator, item=item, kind=kind)
        _check_writable(annotation, version)
        project = annotation.item.project
        schema = project.get_workflow().stage_schema(annotation.stage)
        if not isinstance(values, dict):
            raise Invalid("The annotation must be an object of fields.", errors={"__all__": "must be an object"})
        result = schema.validate(schema.clear_hidden(values), item_text=annotation.item.text)
        if not result.ok:
            raise Invalid("Some fields need attention before submitting.", errors=result.errors)
        prov = _resolve_provenance(schema=schema, annotation=annotation, values=result.values, provenance=provenance)
        if kind == Kind.ANNOTATION and not _reclaim_locked(annotation=annotation, rows=rows, now=now):
            raise SlotTaken(
                "Your claim on this item expired and another annotator has taken its place. Your draft is "
                "kept; you can submit it if a place frees up. Meanwhile, take the next item."
            )
        was_submitted = annotation.status == Status.SUBMITTED
        _write(
            annotation=annotation,
            annotator=annotator,
            now=now,
            values_field="values",
            values=result.values,
            provenance=prov,
            active_ms=_active_ms(time_spent_ms, annotation=annotation, now=now),
            status=Status.SUBMITTED,
            extra={
                "draft_values": None,
                "submitted_at": now,
                "first_submitted_at": annotation.first_submitted_at or now,
            },
        )
        completed = False
        if kind == Kind.ANNOTATION:
            Assignment.objects.filter(pk=annotation.assignment.pk).update(status=Assignment.Status.SUBMITTED)
            submitted = sum(1 for uid, st, *_ in rows if uid != annotator.pk and st == Status.SUBMITTED) + 1
            completed = not was_submitted and submitted >= slots_of(annotation.item, annotation.stage)
    return SaveResult(annotation=annotation, holds_slot=True, completed=completed)


def assignments_release(*, item: Item) -> None:
    """The slots matter only while the item is annotated (keeps "next" bounded): drop them once
    it has been routed. Caller holds the item lock (workflow.services.annotation_submit)."""
    Assignment.objects.filter(item=item, kind=Kind.ANNOTATION).delete()


def item_stage_advance(*, item: Item) -> int:
    """Every annotator of the item's stage submitted and a later stage follows: the item moves
    on to it (its slots are released; the next stage's annotators claim it afresh). Caller
    holds the item lock. Returns the new stage index."""
    stage = item.workflow_stage + 1
    Item.objects.filter(pk=item.pk).update(workflow_stage=stage)
    item.workflow_stage = stage
    assignments_release(item=item)
    return stage


def annotation_flag_record(*, annotator, item: Item, reason: str, note: str = "") -> Annotation:
    """An annotator flags the item they hold (a reason the stage offers: offensive, sexual,
    hateful, uninterpretable): the item leaves the dataset with the reason recorded. The
    caller (workflow.services.item_flag) records the history event."""
    note = (note or "").strip()[:300]
    with transaction.atomic():
        annotation, _ = _load_for_write(annotator=annotator, item=item, kind=Kind.ANNOTATION)
        locked = annotation.item
        if locked.stage != Stage.ANNOTATING:
            raise ItemClosed("This item has left annotation: it can no longer be flagged.")
        stage = locked.project.get_workflow().stage(annotation.stage)
        if reason not in stage.flags:
            raise Invalid(
                "Choose one of the reasons offered.", errors={"reason": f"one of {', '.join(stage.flags) or 'none'}"}
            )
        text = f"{reason}: {note}" if note else reason
        Annotation.objects.filter(pk=annotation.pk).update(status=Status.SKIPPED, skip_reason=f"flagged {text}")
        Item.objects.filter(pk=locked.pk).update(stage=Stage.EXCLUDED, excluded_reason=text[:500])
        locked.stage, locked.excluded_reason = Stage.EXCLUDED, text[:500]
        Assignment.objects.filter(item=locked).delete()
        annotation.status = Status.SKIPPED
    return annotation


def annotation_skip(*, annotator, item: Item, reason: str, note: str = "", kind: str = Kind.ANNOTATION) -> Annotation:
    """Skip with a reason: the slot frees at once and the annotator is never given the item again."""
    if reason not in {k for k, _ in skip_reasons_of(item.project)}:
        raise Invalid("Choose a reason for skipping.", errors={"reason": "choose one of the reasons offered"})
    note = (note or "").strip()[:1000]
    if reason == "other" and not note:
        raise Invalid("Say briefly why you skip this item.", errors={"note": "say briefly why"})
    with transaction.atomic():
        annotation, _ = _load_for_write(annotator=annotator, item=item, kind=kind)
        if annotation.status == Status.SUBMITTED:
            raise ItemClosed("You already submitted this item; it cannot be skipped.")
        if annotation.status == Status.SKIPPED:
            return annotation
        annotation.status = Status.SKIPPED
        annotation.skip_reason = f"{reason}: {note}" if note else reason
        annotation.save(update_fields=["status", "skip_reason", "updated_at"])
        Assignment.objects.filter(annotation=annotation).delete()
    return annotation
