"""Every write path of the annotation app.

Locks: every operation that takes, keeps or fills a slot of an item (claim, draft save, submit)
runs in one transaction holding the item's row lock (``SELECT ... FOR UPDATE`` on
``projects_item``) and re-reads the item's annotations under it, so the N-slot rule (see
annotation.models) is checked against committed data only. "Next item" uses
``FOR UPDATE SKIP LOCKED`` so annotators claiming at the same moment pass over each other's
item instead of queueing behind it. SQLite has no row locks: its ``IMMEDIATE`` transactions
(concord.settings) serialize the same code instead.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Case, Count, IntegerField, Q, Value, When
from django.utils import timezone

from annotation.models import (
    Annotation,
    AnnotationRevision,
    AnnotatorPreference,
    Assignment,
    Kind,
    assignment_of,
    slot_held,
)
from annotation.selectors import session_count
from candidates.selectors import candidate_id_for_letter, candidates_for_annotator
from core.errors import Conflict, Invalid, NotFound, StaleVersion
from projects.models import Item, Membership, Project, Role, Stage
from projects.schema import Schema

log = logging.getLogger(__name__)

Status = Annotation.Status

#: Skip reasons offered in the UI (Meme3W A.2 guideline 1: unclear or multi-category samples are
#: excluded rather than forced; Appendix D: annotators may skip content they find disturbing).
SKIP_REASONS = [
    ("disturbing", "The content is disturbing to me"),
    ("unclear_category", "The target category cannot be determined reliably"),
    ("several_categories", "It attacks several categories independently"),
    ("unreadable", "The image or text cannot be read"),
    ("other", "Other reason"),
]
SKIP_REASON_KEYS = {k for k, _ in SKIP_REASONS}

MAX_VALUES_BYTES = 200_000
#: One save can add at most this much active time (the browser's clock is not trusted further).
MAX_ACTIVE_MS_PER_SAVE = 2 * 60 * 60 * 1000
#: How many items of the "in progress" list are tried before falling back to a fresh item.
CLAIM_TRIES = 3
PARTIAL_CANDIDATES = 20


class SlotTaken(Conflict):
    code = "slot_taken"


class ItemClosed(Conflict):
    code = "closed"


class NotAssigned(NotFound):
    code = "not_assigned"


@dataclass
class ClaimResult:
    #: claimed (a new item), resumed (own unfinished item), empty (nothing left), break (session cap).
    outcome: str
    annotation: Annotation | None = None


@dataclass
class SaveResult:
    annotation: Annotation
    holds_slot: bool
    #: True when this was the item's N-th first submission: the caller (workflow) routes it.
    completed: bool = False
    #: Set by workflow.services.annotation_submit: where the item went (never sent to annotators).
    routed_to: str | None = None


# --------------------------------------------------------------------------- slots


def _item_rows(*, item_id: int, kind: str) -> list[tuple]:
    """(annotator_id, annotation status, assignment status, expires_at) of every annotation of the item."""
    return list(
        Annotation.objects.filter(item_id=item_id, kind=kind).values_list(
            "annotator_id", "status", "assignment__status", "assignment__expires_at"
        )
    )


def _held_by_others(rows: list[tuple], *, annotator_id: int, now) -> int:
    return sum(1 for uid, _, a_status, exp in rows if uid != annotator_id and slot_held(a_status, exp, now))


def _expiry(project: Project, now):
    return now + timedelta(minutes=max(1, project.claim_timeout_minutes))


def _lock_item(item_id: int) -> Item | None:
    """Row-lock the item (waits for a concurrent holder). Caller is inside transaction.atomic()."""
    # of=("self",): lock the item row only. Without it PostgreSQL also locks the joined project
    # row, which would serialize every claim and save of the whole project.
    return Item.objects.select_for_update(of=("self",)).filter(pk=item_id).select_related("project").first()


def _claim_locked(*, item: Item, annotator, now) -> Annotation | None:
    """Under the item's row lock: give ``annotator`` a slot of ``item`` if one is free and they never had the item."""
    project = item.project
    rows = _item_rows(item_id=item.pk, kind=Kind.ANNOTATION)
    if any(uid == annotator.pk for uid, *_ in rows):
        return None
    if _held_by_others(rows, annotator_id=annotator.pk, now=now) >= project.annotators_per_item:
        return None
    annotation = Annotation.objects.create(
        item=item, annotator=annotator, kind=Kind.ANNOTATION, status=Status.DRAFT,
        schema_version=project.schema_version,
    )
    Assignment.objects.create(
        project=project, item=item, annotator=annotator, annotation=annotation, kind=Kind.ANNOTATION,
        status=Assignment.Status.ACTIVE, claimed_at=now, expires_at=_expiry(project, now),
    )
    return annotation


def _reclaim_locked(*, annotation: Annotation, rows: list[tuple], now) -> bool:
    """Under the item's row lock: keep (or take back) the annotator's slot if possible.

    Renewal also goes through the count: clocks of two app servers may disagree by a little,
    and a renewal decided on a clock that runs late must not create an N+1-th holder.
    """
    item = annotation.item
    assignment = assignment_of(annotation)
    if assignment is not None and assignment.status == Assignment.Status.SUBMITTED:
        return True
    held = _held_by_others(rows, annotator_id=annotation.annotator_id, now=now)
    if held >= item.project.annotators_per_item:
        return False
    expires = _expiry(item.project, now)
    if assignment is None:
        assignment = Assignment.objects.create(
            project=item.project, item=item, annotator_id=annotation.annotator_id, annotation=annotation,
            kind=annotation.kind, status=Assignment.Status.ACTIVE, claimed_at=now, expires_at=expires,
        )
        annotation.assignment = assignment
    elif slot_held(assignment.status, assignment.expires_at, now):
        # Renew a live claim only once a tenth of the timeout has passed: saves a write on most
        # autosaves, and an active annotator still never comes near the expiry.
        if assignment.expires_at is not None and assignment.expires_at - now < (expires - now) * 0.9:
            assignment.expires_at = expires
            Assignment.objects.filter(pk=assignment.pk).update(expires_at=expires)
    else:
        assignment.claimed_at, assignment.expires_at = now, expires
        Assignment.objects.filter(pk=assignment.pk).update(expires_at=expires, claimed_at=now)
    return True


def _mine(annotator):
    return Annotation.objects.filter(annotator=annotator, kind=Kind.ANNOTATION).values("item_id")


def _partial_query(*, project: Project, annotator, now, tried: set[int], skip_locked: bool):
    """Items others started and that still have a free slot, most slots held first (locking query).

    The list comes from the assignment table, which holds items in flight only (a routed
    item's assignments are deleted), so its cost follows the number of people at work, not
    the project size.
    """
    live = Q(status=Assignment.Status.SUBMITTED) | Q(status=Assignment.Status.ACTIVE, expires_at__gt=now)
    ids = list(
        Assignment.objects.filter(project=project, kind=Kind.ANNOTATION, item__stage=Stage.ANNOTATING)
        .exclude(item_id__in=_mine(annotator))
        .exclude(item_id__in=tried)
        .values("item_id")
        .annotate(held=Count("id", filter=live))
        .filter(held__lt=project.annotators_per_item)
        .order_by("-held", "item_id")
        .values_list("item_id", flat=True)[:PARTIAL_CANDIDATES]
    )
    if not ids:
        return None
    rank = Case(*[When(pk=pk, then=Value(i)) for i, pk in enumerate(ids)], output_field=IntegerField())
    return (
        Item.objects.select_for_update(skip_locked=skip_locked, of=("self",))
        .filter(pk__in=ids, stage=Stage.ANNOTATING)
        .order_by(rank)
    )


def _fresh_query(*, project: Project, annotator, now, tried: set[int], skip_locked: bool):
    """Untouched items (no assignment), oldest first (locking query)."""
    return (
        Item.objects.select_for_update(skip_locked=skip_locked, of=("self",))
        .filter(project=project, stage=Stage.ANNOTATING)
        .exclude(assignments__kind=Kind.ANNOTATION)
        .exclude(pk__in=_mine(annotator))
        .exclude(pk__in=tried)
        .order_by("id")  # with fresh statistics PostgreSQL walks the primary key and stops early
    )


def assignment_claim_next(*, annotator, project: Project) -> ClaimResult:
    """Hand ``annotator`` an item of ``project`` to annotate.

    Order: their own live claim (resume); their own draft whose claim expired, if its slot is
    still free; then, unless the session cap is reached, a new item: first those already
    started by others (most slots held first, so items finish rather than all starting), then
    untouched items in id order. An item skipped by the annotator is never handed to them again.

    Locks: see the module docstring. The chosen item is row-locked (first with SKIP LOCKED,
    then, if that found nothing, waiting) and its slots re-counted under the lock before the
    claim is written, so no item ever has more than N holders.
    """
    now = timezone.now()
    own = list(
        Assignment.objects.filter(
            project=project, annotator=annotator, kind=Kind.ANNOTATION, status=Assignment.Status.ACTIVE,
            item__stage=Stage.ANNOTATING, annotation__status=Status.DRAFT,
        ).order_by("claimed_at", "id").values_list("item_id", "expires_at")[:20]
    )
    for item_id, expires_at in own:
        if expires_at is None or expires_at > now:
            return ClaimResult("resumed", Annotation.objects.get(item_id=item_id, annotator=annotator, kind=Kind.ANNOTATION))
    for item_id, _ in own:
        with transaction.atomic():
            item = _lock_item(item_id)
            if item is None or item.stage != Stage.ANNOTATING:
                continue
            annotation = (
                Annotation.objects.select_related("assignment").filter(item=item, annotator=annotator, kind=Kind.ANNOTATION).first()
            )
            if annotation is None or annotation.status != Status.DRAFT:
                continue
            annotation.item = item
            if _reclaim_locked(annotation=annotation, rows=_item_rows(item_id=item.pk, kind=Kind.ANNOTATION), now=now):
                return ClaimResult("resumed", annotation)

    if project.session_item_cap and session_count(user=annotator, project=project) >= project.session_item_cap:
        return ClaimResult("break")

    tried: set[int] = set()
    # First pass: SKIP LOCKED, so concurrent claimers spread over different items. Second pass:
    # items still available were only skipped because someone held their lock for a moment;
    # wait for it (a claim transaction lasts milliseconds) instead of answering "empty".
    for skip_locked in (True, False):
        for query in (_partial_query, _fresh_query):
            for _ in range(CLAIM_TRIES):
                qs = query(project=project, annotator=annotator, now=now, tried=tried, skip_locked=skip_locked)
                if qs is None:
                    break
                with transaction.atomic():
                    item = qs.first()
                    if item is None:
                        break
                    tried.add(item.pk)
                    item.project = project
                    annotation = _claim_locked(item=item, annotator=annotator, now=now)
                if annotation is not None:
                    return ClaimResult("claimed", annotation)
    return ClaimResult("empty")


def annotation_open(*, annotation: Annotation) -> Annotation:
    """Record the first opening and, for a draft whose claim expired, take the slot back if free.

    ``annotation`` comes from a permission-checked selector, with ``item`` and ``assignment``
    loaded. Sets ``annotation.holds_slot`` for the page.
    """
    now = timezone.now()
    if annotation.opened_at is None:
        # Conditional update: two tabs opening at once keep the earliest time.
        Annotation.objects.filter(pk=annotation.pk, opened_at__isnull=True).update(opened_at=now)
        annotation.opened_at = now
    assignment = assignment_of(annotation)
    holds = assignment is not None and slot_held(assignment.status, assignment.expires_at, now)
    if (
        not holds
        and annotation.kind == Kind.ANNOTATION
        and annotation.status == Status.DRAFT
        and annotation.item.stage == Stage.ANNOTATING
    ):
        with transaction.atomic():
            item = _lock_item(annotation.item_id) or annotation.item
            annotation.item = item
            holds = item.stage == Stage.ANNOTATING and _reclaim_locked(
                annotation=annotation, rows=_item_rows(item_id=item.pk, kind=annotation.kind), now=now
            )
    annotation.holds_slot = holds
    return annotation


# --------------------------------------------------------------------------- values


def _clean_draft_values(schema: Schema, values: Any) -> dict:
    if not isinstance(values, dict):
        raise Invalid("The annotation must be an object of fields.", errors={"__all__": "must be an object"})
    unknown = sorted(set(values) - set(schema.by_name))
    if unknown:
        raise Invalid(f"Unknown field(s): {', '.join(unknown)}", errors={"__all__": f"unknown field(s): {', '.join(unknown)}"})
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
        raise Invalid("A blind audit has no candidates to take values from.", errors={"__all__": "no candidates in an audit"})
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
    shown = {c.letter: c for c in candidates_for_annotator(item=annotation.item, user=annotation.annotator)}
    ids: dict[str, int | None] = {}
    previous = annotation.provenance or {}
    out = {}
    for name, letter in wanted.items():
        cand = shown.get(letter)
        if cand is None:
            raise Invalid(f"There is no candidate {letter}.", errors={name: f"there is no candidate {letter}"})
        if letter not in ids:
            old = previous.get(name) or {}
            ids[letter] = old.get("candidate_id") if old.get("letter") == letter and old.get("candidate_id") else (
                candidate_id_for_letter(item=annotation.item, user=annotation.annotator, letter=letter)
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


def _load_for_write(*, annotator, item: Item, kind: str):
    """Lock the item, then read its annotations of ``kind`` in one query: the caller's (with its
    assignment) and the (annotator, status, assignment status, expiry) rows of all of them."""
    locked = _lock_item(item.pk)
    if locked is None:
        raise NotAssigned("This item does not exist any more.")
    annotation, rows = None, []
    for a in Annotation.objects.filter(item=locked, kind=kind).select_related("assignment"):
        assignment = assignment_of(a)
        rows.append((a.annotator_id, a.status, assignment.status if assignment else None,
                     assignment.expires_at if assignment else None))
        if a.annotator_id == annotator.pk:
            annotation = a
    if annotation is None:
        raise NotAssigned("This item is not assigned to you.")
    annotation.item = locked
    annotation.annotator = annotator
    return annotation, rows


def _check_writable(annotation: Annotation, version: Any) -> None:
    if annotation.status == Status.SKIPPED:
        raise ItemClosed("You skipped this item; it is no longer yours to annotate.")
    if annotation.kind == Kind.ANNOTATION and annotation.item.stage != Stage.ANNOTATING:
        raise ItemClosed(
            "This item has left annotation (it is in adjudication or done): it can no longer be changed."
        )
    if isinstance(version, bool) or not isinstance(version, int):
        raise Invalid("A version number is required.", errors={"__all__": "version must be an integer"})
    if version != annotation.version:
        raise StaleVersion(
            f"This annotation was saved elsewhere (another tab or window) since you loaded it "
            f"(your version {version}, saved version {annotation.version}). Nothing was overwritten: "
            "reload the page to continue from the saved version; your edits stay in this browser."
        )


def _write(*, annotation: Annotation, annotator, now, values_field: str, values: dict, provenance: dict,
           active_ms: int, status: str, extra: dict | None = None) -> None:
    annotation.version += 1
    setattr(annotation, values_field, values)
    annotation.provenance = provenance
    annotation.time_spent_ms += active_ms
    annotation.status = status
    annotation.schema_version = annotation.item.project.schema_version
    annotation.updated_at = now
    fields = {values_field: values, "version": annotation.version, "provenance": provenance,
              "time_spent_ms": annotation.time_spent_ms, "status": status,
              "schema_version": annotation.schema_version, "updated_at": now, **(extra or {})}
    for k, v in (extra or {}).items():
        setattr(annotation, k, v)
    Annotation.objects.filter(pk=annotation.pk).update(**fields)
    AnnotationRevision.objects.create(
        annotation=annotation, version=annotation.version, status=status, values=values,
        provenance=provenance, saved_by=annotator,
    )


def annotation_save_draft(
    *, annotator, item: Item, values: Any, version: Any, provenance: Any = None, time_spent_ms: Any = 0,
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
        schema = annotation.item.project.get_schema()
        clean = _clean_draft_values(schema, values)
        prov = _resolve_provenance(schema=schema, annotation=annotation, values=clean, provenance=provenance)
        holds = True
        if kind == Kind.ANNOTATION:
            holds = _reclaim_locked(annotation=annotation, rows=rows, now=now)
        target = "draft_values" if annotation.status == Status.SUBMITTED else "values"
        _write(annotation=annotation, annotator=annotator, now=now, values_field=target, values=clean,
               provenance=prov, active_ms=_active_ms(time_spent_ms, annotation=annotation, now=now),
               status=annotation.status)
    return SaveResult(annotation=annotation, holds_slot=holds)


def annotation_submit_record(
    *, annotator, item: Item, values: Any, version: Any, provenance: Any = None, time_spent_ms: Any = 0,
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
        schema = project.get_schema()
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
        _write(annotation=annotation, annotator=annotator, now=now, values_field="values", values=result.values,
               provenance=prov, active_ms=_active_ms(time_spent_ms, annotation=annotation, now=now),
               status=Status.SUBMITTED,
               extra={"draft_values": None, "submitted_at": now,
                      "first_submitted_at": annotation.first_submitted_at or now})
        completed = False
        if kind == Kind.ANNOTATION:
            Assignment.objects.filter(pk=annotation.assignment.pk).update(status=Assignment.Status.SUBMITTED)
            submitted = sum(1 for uid, st, *_ in rows if uid != annotator.pk and st == Status.SUBMITTED) + 1
            completed = not was_submitted and submitted >= project.annotators_per_item
    return SaveResult(annotation=annotation, holds_slot=True, completed=completed)


def assignments_release(*, item: Item) -> None:
    """The slots matter only while the item is annotated (keeps "next" bounded): drop them once
    it has been routed. Caller holds the item lock (workflow.services.annotation_submit)."""
    Assignment.objects.filter(item=item, kind=Kind.ANNOTATION).delete()


def annotation_skip(*, annotator, item: Item, reason: str, note: str = "", kind: str = Kind.ANNOTATION) -> Annotation:
    """Skip with a reason: the slot frees at once and the annotator is never given the item again."""
    if reason not in SKIP_REASON_KEYS:
        raise Invalid("Choose a reason for skipping.", errors={"reason": "choose a reason"})
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


def annotation_audit_assign(*, auditor, item: Item) -> Annotation:
    """Give ``auditor`` a candidate-blind audit of ``item`` (idempotent; never expires).

    Refused when the auditor is not an auditor of the item's project, or annotated the item
    themselves (the audit would not be independent).
    """
    if not Membership.objects.filter(project_id=item.project_id, user=auditor, role=Role.AUDITOR).exists():
        raise Invalid(f"{auditor} is not an auditor of this project.")
    if Annotation.objects.filter(item=item, annotator=auditor, kind=Kind.ANNOTATION, status=Status.SUBMITTED).exists():
        raise Invalid(f"{auditor} annotated this item and cannot audit it blind.")
    now = timezone.now()
    with transaction.atomic():
        annotation, _ = Annotation.objects.get_or_create(
            item=item, annotator=auditor, kind=Kind.AUDIT,
            defaults={"status": Status.DRAFT, "schema_version": item.project.schema_version},
        )
        try:
            with transaction.atomic():
                Assignment.objects.get_or_create(
                    annotation=annotation,
                    defaults={"project_id": item.project_id, "item": item, "annotator": auditor, "kind": Kind.AUDIT,
                              "status": Assignment.Status.ACTIVE, "claimed_at": now, "expires_at": None},
                )
        except IntegrityError:  # a concurrent call made it
            pass
    return annotation


# --------------------------------------------------------------------------- welfare


def content_warning_accept(*, user, project: Project, blur_images: bool | None = None) -> AnnotatorPreference:
    pref, _ = AnnotatorPreference.objects.get_or_create(user=user, project=project)
    pref.content_warning_accepted_at = pref.content_warning_accepted_at or timezone.now()
    if blur_images is not None:
        pref.blur_images = blur_images
    pref.save(update_fields=["content_warning_accepted_at", "blur_images"])
    return pref


def annotator_preference_update(*, user, project: Project, blur_images: bool | None = None,
                                auto_advance: bool | None = None) -> AnnotatorPreference:
    """Change the given settings (None: leave as it is)."""
    pref, _ = AnnotatorPreference.objects.get_or_create(user=user, project=project)
    changed = []
    if blur_images is not None:
        pref.blur_images = bool(blur_images)
        changed.append("blur_images")
    if auto_advance is not None:
        pref.auto_advance = bool(auto_advance)
        changed.append("auto_advance")
    if changed:
        pref.save(update_fields=changed)
    return pref
