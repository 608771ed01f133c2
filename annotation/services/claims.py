"""Claiming items: the next item for an annotator, opening a claimed item, keeping a slot.

Locks: every operation that takes or keeps a slot of an item runs in one transaction holding
the item row lock (``SELECT ... FOR UPDATE`` on ``projects_item``) and re-reads the item's
annotations under it, so the N-slot rule (annotation.models) is checked against committed data
only. "Next item" uses ``FOR UPDATE SKIP LOCKED`` so annotators claiming at the same moment pass
over each other's item instead of queueing behind it. SQLite has no row locks: its ``IMMEDIATE``
transactions (concord.settings) serialize the same code instead.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import router, transaction
from django.db.models import Case, IntegerField, Value, When
from django.utils import timezone

from annotation.models import (
    Annotation,
    Assignment,
    Kind,
    assignment_of,
    slot_held,
)
from annotation.selectors import session_count
from candidates.models import Conversion
from candidates.selectors import candidate_ids_for_annotator
from core.models import JobStatus
from core.rows import adapt_time, alias_for, columns, fetch_rows, for_update_of, model_from_row, values_of, width
from projects.models import Item, Project, Stage

log = logging.getLogger(__name__)
Status = Annotation.Status


#: How many items of the "in progress" list are tried before falling back to a fresh item.
CLAIM_TRIES = 3
PARTIAL_CANDIDATES = 20


@dataclass
class ClaimResult:
    #: claimed (a new item), resumed (own unfinished item), empty (nothing left), break (session cap).
    outcome: str
    annotation: Annotation | None = None


# --------------------------------------------------------------------------- slots


#: (annotator, annotation status, assignment status, expiry) of an item's annotations in one
#: stage; LEFT JOIN: an annotation may have no assignment. Written out (core.rows): every claim
#: and every opening of an expired draft reads it.
_ITEM_ROWS = (
    f'SELECT a."annotator_id", a."status", s."status", s."expires_at" FROM "{Annotation._meta.db_table}" a'
    f' LEFT OUTER JOIN "{Assignment._meta.db_table}" s ON s."annotation_id" = a."id"'
    ' WHERE a."item_id" = %s AND a."kind" = %s AND a."stage" = %s'
)


def _item_rows(*, item_id: int, kind: str, stage: int = 0) -> list[tuple]:
    """(annotator_id, annotation status, assignment status, expires_at) of every annotation of
    the item in one workflow stage."""
    alias = alias_for(Annotation)
    return [
        (annotator_id, status, *values_of(Assignment, ("status", "expires_at"), rest, alias=alias))
        for annotator_id, status, *rest in fetch_rows(alias, _ITEM_ROWS, [item_id, str(kind), stage])
    ]


def slots_of(item: Item, stage: int) -> int:
    """How many annotators work ``item`` in workflow ``stage`` (projects.workflow)."""
    return item.project.get_workflow().annotators_for(item, stage)


def _held_by_others(rows: list[tuple], *, annotator_id: int, now) -> int:
    return sum(1 for uid, _, a_status, exp in rows if uid != annotator_id and slot_held(a_status, exp, now))


def _expiry(project: Project, now):
    return now + timedelta(minutes=max(1, project.claim_timeout_minutes))


#: The item with its project (core.rows: through the ORM this cost about 1 ms of CPU on every
#: save). The lock clause is added per call (core.rows.for_update_of): the item row only.
_ITEM_WITH_PROJECT = (
    f'SELECT {columns(Item, "i")}, {columns(Project, "p")} FROM "{Item._meta.db_table}" i'
    f' INNER JOIN "{Project._meta.db_table}" p ON p."id" = i."project_id" WHERE i."id" = %s'
)


def _lock_item(item_id: int, *, project_id: int | None = None) -> Item | None:
    """Row-lock the item (waits for a concurrent holder) and read it with its project, fresh.
    Caller is inside transaction.atomic(). With ``project_id``, only an item of that project
    (None otherwise)."""
    alias = router.db_for_write(Item)
    sql, params = _ITEM_WITH_PROJECT, [int(item_id)]
    if project_id is not None:
        sql, params = sql + ' AND i."project_id" = %s', [*params, project_id]
    # OF i: lock the item row only. Without it PostgreSQL also locks the joined project row,
    # which would serialize every claim and save of the whole project.
    found = fetch_rows(alias, sql + for_update_of(alias, "i"), params)
    if not found:
        return None
    item = model_from_row(Item, found[0], alias=alias)
    item.project = model_from_row(Project, found[0], start=width(Item), alias=alias)
    return item


def _claim_locked(*, item: Item, annotator, now) -> Annotation | None:
    """Under the item's row lock: give ``annotator`` a slot of ``item`` in its current workflow
    stage if one is free, they never had the item in that stage, and the stage does not exclude
    the people who worked an earlier one (MemeCap: round 2 by other annotators than round 1)."""
    project = item.project
    workflow = project.get_workflow()
    stage = workflow.stage(item.workflow_stage)
    rows = _item_rows(item_id=item.pk, kind=Kind.ANNOTATION, stage=stage.index)
    if any(uid == annotator.pk for uid, *_ in rows):
        return None
    if (
        stage.exclude_workers_of
        and Annotation.objects.filter(
            item=item, annotator=annotator, kind=Kind.ANNOTATION, stage__in=stage.exclude_workers_of
        ).exists()
    ):
        return None
    if workflow.needs_split() and not item.split:
        item.split = workflow.split_for(item)  # pinned: the release keeps it (projects.workflow)
        Item.objects.filter(pk=item.pk, split="").update(split=item.split)
    if _held_by_others(rows, annotator_id=annotator.pk, now=now) >= workflow.annotators_for(item, stage.index):
        return None
    values, provenance = _start(item, stage, annotator=annotator, schema=workflow.stage_schema(stage.index))
    annotation = Annotation.objects.create(
        item=item,
        annotator=annotator,
        kind=Kind.ANNOTATION,
        stage=stage.index,
        status=Status.DRAFT,
        values=values,
        provenance=provenance,
        schema_version=project.schema_version,
        guideline_version=project.guideline_version,
    )
    Assignment.objects.create(
        project=project,
        item=item,
        annotator=annotator,
        annotation=annotation,
        kind=Kind.ANNOTATION,
        stage=stage.index,
        status=Assignment.Status.ACTIVE,
        claimed_at=now,
        expires_at=_expiry(project, now),
    )
    return annotation


def _start(item: Item, stage, *, annotator, schema) -> tuple[dict, dict]:
    """(values, provenance) a new annotation starts from.

    A review stage starts from the model's conversion (projects.workflow "review"): the reviewer
    accepts, edits or removes what the model wrote. A stage with ``prefill: agreement`` starts
    from what most of the candidates this annotator sees agree on. Other stages start empty.
    """
    if stage.review is not None:
        values = (
            Conversion.objects.filter(item=item, stage=stage.review, status=JobStatus.DONE)
            .values_list("values", flat=True)
            .first()
        )
        return dict(values or {}), {}
    if stage.prefill == "agreement":
        return candidates_agreement(schema=schema, shown=candidate_ids_for_annotator(item=item, user=annotator))
    return {}, {}


ABSENT = object()  # stands for every value the field type calls absent (None, no boxes, ...)


def candidates_agreement(*, schema, shown: dict) -> tuple[dict, dict]:
    """The values on which more than half of the shown candidates agree, field by field, and
    their provenance (taken, unedited, from the first agreeing letter).

    ``shown`` is ``candidate_ids_for_annotator``'s letter -> (candidate id, candidate). Values
    are compared as the field type compares them (``canonical``; every absent value alike), the
    way a save decides whether a taken value was edited. A candidate without the field (removed
    as malformed) counts against every value, so a field is filled only on a real majority of
    all the candidates. Fields a filled value hides (a non-harmful label hides the target) stay
    empty; fields without a majority stay empty for the annotator to decide.
    """
    if len(shown) < 2:
        return {}, {}
    letters = list(shown)  # A, B, C, ...: candidate_ids_for_annotator gives them in letter order
    values: dict = {}
    provenance: dict = {}
    for spec in schema.fields:
        name, ftype = spec["name"], schema.type_of(spec["name"])
        groups: list[tuple[object, list[str]]] = []  # (canonical value, letters); == as a save compares
        for letter in letters:
            fields = shown[letter][1].fields
            if name not in fields:
                continue
            try:
                key = ABSENT if ftype.is_absent(spec, fields[name]) else ftype.canonical(spec, fields[name])
            except (TypeError, ValueError):
                continue
            same = next((group for value, group in groups if value == key), None)
            if same is None:
                groups.append((key, [letter]))
            else:
                same.append(letter)
        agreeing = max((group for _, group in groups), key=len, default=[])
        if 2 * len(agreeing) > len(letters):
            letter = agreeing[0]
            values[name] = shown[letter][1].fields[name]
            provenance[name] = {"letter": letter, "candidate_id": shown[letter][0], "edited": False}
    full = schema.clear_hidden({**schema.absent_values(), **values})
    kept = [name for name in values if schema.is_visible(schema.by_name[name], full)]
    return {name: values[name] for name in kept}, {name: provenance[name] for name in kept}


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
    if held >= slots_of(item, annotation.stage):
        return False
    expires = _expiry(item.project, now)
    if assignment is None:
        assignment = Assignment.objects.create(
            project=item.project,
            item=item,
            annotator_id=annotation.annotator_id,
            annotation=annotation,
            kind=annotation.kind,
            stage=annotation.stage,
            status=Assignment.Status.ACTIVE,
            claimed_at=now,
            expires_at=expires,
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


def _mine(annotator, stages: tuple[int, ...]):
    """Items the annotator worked in these stages: never handed to them again there."""
    return Annotation.objects.filter(annotator=annotator, kind=Kind.ANNOTATION, stage__in=stages).values("item_id")


def _partial_query(*, project: Project, annotator, now, tried: set[int], skip_locked: bool, stage):
    """Items of ``stage`` others started and that still have a free slot, most slots held first
    (locking query).

    The list comes from the assignment table, which holds items in flight only (a routed
    item's assignments are deleted), so its cost follows the number of people at work, not
    the project size. With a count that varies per item, the largest one filters here and
    _claim_locked applies the item's own.
    """
    # Written out (core.rows): its ORM form cost more CPU to compile than PostgreSQL to answer.
    alias = alias_for(Assignment)
    stages = (stage.index, *stage.exclude_workers_of)
    live = '(s."status" = %s OR (s."status" = %s AND s."expires_at" > %s))'
    live_params = [Assignment.Status.SUBMITTED, Assignment.Status.ACTIVE, adapt_time(alias, now)]
    sql = (
        f'SELECT s."item_id" FROM "{Assignment._meta.db_table}" s'
        f' INNER JOIN "{Item._meta.db_table}" i ON i."id" = s."item_id"'
        ' WHERE s."project_id" = %s AND s."kind" = %s AND s."stage" = %s AND i."stage" = %s'
        ' AND i."workflow_stage" = %s'
        f' AND NOT (s."item_id" IN (SELECT m."item_id" FROM "{Annotation._meta.db_table}" m'
        f' WHERE m."annotator_id" = %s AND m."kind" = %s AND m."stage" IN ({", ".join(["%s"] * len(stages))})))'
    )
    params = [project.pk, Kind.ANNOTATION, stage.index, Stage.ANNOTATING, stage.index, annotator.pk, Kind.ANNOTATION]
    params += stages
    if tried:
        sql += f' AND NOT (s."item_id" IN ({", ".join(["%s"] * len(tried))}))'
        params += sorted(tried)
    sql += (
        f' GROUP BY s."item_id" HAVING COUNT(CASE WHEN {live} THEN 1 END) < %s'
        f' ORDER BY COUNT(CASE WHEN {live} THEN 1 END) DESC, s."item_id" ASC LIMIT %s'
    )
    params += [*live_params, stage.annotators_range()[1], *live_params, PARTIAL_CANDIDATES]
    ids = [item_id for (item_id,) in fetch_rows(alias, sql, params)]
    if not ids:
        return None
    rank = Case(*[When(pk=pk, then=Value(i)) for i, pk in enumerate(ids)], output_field=IntegerField())
    return (
        Item.objects.select_for_update(skip_locked=skip_locked, of=("self",))
        .filter(pk__in=ids, stage=Stage.ANNOTATING, workflow_stage=stage.index)
        .order_by(rank)
    )


def _fresh_query(*, project: Project, annotator, now, tried: set[int], skip_locked: bool, stage):
    """Untouched items of ``stage`` (no assignment), oldest first (locking query)."""
    return (
        Item.objects.select_for_update(skip_locked=skip_locked, of=("self",))
        .filter(project=project, stage=Stage.ANNOTATING, workflow_stage=stage.index)
        .exclude(assignments__kind=Kind.ANNOTATION)
        .exclude(pk__in=_mine(annotator, (stage.index, *stage.exclude_workers_of)))
        .exclude(pk__in=tried)
        .order_by("id")  # with fresh statistics PostgreSQL walks the primary key and stops early
    )


#: The annotator's own active claims on drafts of items still in their stage, oldest first
#: (written out, core.rows: every "next" asks first).
_OWN_CLAIMS = (
    f'SELECT s."item_id", s."expires_at", s."stage" FROM "{Assignment._meta.db_table}" s'
    f' INNER JOIN "{Item._meta.db_table}" i ON i."id" = s."item_id"'
    f' INNER JOIN "{Annotation._meta.db_table}" a ON a."id" = s."annotation_id"'
    ' WHERE s."project_id" = %s AND s."annotator_id" = %s AND s."kind" = %s AND s."status" = %s'
    ' AND i."stage" = %s AND i."workflow_stage" = s."stage" AND a."status" = %s'
    ' ORDER BY s."claimed_at" ASC, s."id" ASC LIMIT 20'
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
    alias = alias_for(Assignment)
    own = [
        values_of(Assignment, ("item_id", "expires_at", "stage"), row, alias=alias)
        for row in fetch_rows(
            alias,
            _OWN_CLAIMS,
            [project.pk, annotator.pk, Kind.ANNOTATION, Assignment.Status.ACTIVE, Stage.ANNOTATING, Status.DRAFT],
        )
    ]
    for item_id, expires_at, stage in own:
        if expires_at is None or expires_at > now:
            return ClaimResult(
                "resumed",
                Annotation.objects.get(item_id=item_id, annotator=annotator, kind=Kind.ANNOTATION, stage=stage),
            )
    for item_id, _, stage in own:
        with transaction.atomic():
            item = _lock_item(item_id)
            if item is None or item.stage != Stage.ANNOTATING or item.workflow_stage != stage:
                continue
            annotation = (
                Annotation.objects.select_related("assignment")
                .filter(item=item, annotator=annotator, kind=Kind.ANNOTATION, stage=stage)
                .first()
            )
            if annotation is None or annotation.status != Status.DRAFT:
                continue
            annotation.item = item
            rows = _item_rows(item_id=item.pk, kind=Kind.ANNOTATION, stage=stage)
            if _reclaim_locked(annotation=annotation, rows=rows, now=now):
                return ClaimResult("resumed", annotation)

    if project.session_item_cap and session_count(user=annotator, project=project) >= project.session_item_cap:
        return ClaimResult("break")

    tried: set[int] = set()
    # Later stages first: items already under way finish before new ones start.
    # A stage with its own pool of workers (projects.workflow "workers") is only theirs.
    stages = [s for s in reversed(project.get_workflow().stages) if s.open_to(annotator.username)]
    # First pass: SKIP LOCKED, so concurrent claimers spread over different items. Second pass:
    # items still available were only skipped because someone held their lock for a moment;
    # wait for it (a claim transaction lasts milliseconds) instead of answering "empty".
    for skip_locked in (True, False):
        for stage, query in ((s, q) for s in stages for q in (_partial_query, _fresh_query)):
            for _ in range(CLAIM_TRIES):
                qs = query(
                    project=project, annotator=annotator, now=now, tried=tried, skip_locked=skip_locked, stage=stage
                )
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
        and annotation.item.workflow_stage == annotation.stage
    ):
        with transaction.atomic():
            item = _lock_item(annotation.item_id) or annotation.item
            annotation.item = item
            holds = (
                item.stage == Stage.ANNOTATING
                and item.workflow_stage == annotation.stage
                and _reclaim_locked(
                    annotation=annotation,
                    rows=_item_rows(item_id=item.pk, kind=annotation.kind, stage=annotation.stage),
                    now=now,
                )
            )
    annotation.holds_slot = holds
    return annotation


def claims_release_for(*, project, user) -> int:
    """A deactivated member's live claims go back to the pool (their drafts are kept, as after an
    expiry). Connected to projects.hooks.member_deactivated. Submitted slots stay: that work counts.

    Locks: none; deleting an ACTIVE assignment only frees a slot, and a claim re-reads the
    item's assignments under the item lock before taking one."""
    deleted, _ = Assignment.objects.filter(
        project=project, annotator=user, kind=Kind.ANNOTATION, status=Assignment.Status.ACTIVE
    ).delete()
    return deleted
