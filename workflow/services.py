"""Steps that span two pipeline stages (CONVENTIONS "Layers run one way").

Submitting the N-th annotation of an item moves the item on: annotation records the
submission, adjudication routes the item (gold when identical, auto-merge, or a reviewer's
queue). Neither app imports the other; this module calls both, in one transaction.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from adjudication.services import history_record, item_keep_references, item_route
from annotation.models import Kind
from annotation.services import (
    SaveResult,
    annotation_flag_record,
    annotation_submit_record,
    assignments_release,
    item_stage_advance,
)
from projects.models import Item


def annotation_submit(
    *,
    annotator,
    item: Item,
    values: Any,
    version: Any,
    provenance: Any = None,
    time_spent_ms: Any = 0,
    kind: str = Kind.ANNOTATION,
) -> SaveResult:
    """Validate and submit (annotation.services.annotation_submit_record); when this is the
    item's N-th submission, route the item in the same transaction.

    Locks: annotation_submit_record takes the item's row lock; it is held until this
    transaction commits, so the N-th submission and the item's move out of annotation commit
    together and no concurrent submit can see the item half-routed. ``routed_to`` is for
    servers only: it is never sent to the annotator (it would tell them whether the others
    agreed with them).
    """
    with transaction.atomic():
        result = annotation_submit_record(
            annotator=annotator,
            item=item,
            values=values,
            version=version,
            provenance=provenance,
            time_spent_ms=time_spent_ms,
            kind=kind,
        )
        if result.completed:
            result.routed_to = _route(result.annotation.item)
    return result


def _route(item: Item) -> str:
    """The item's stage is complete: on to the next stage (projects.workflow), or, after the
    last, to gold -- kept references, or compared and adjudicated."""
    workflow = item.project.get_workflow()
    if item.workflow_stage < workflow.last:
        stage = item_stage_advance(item=item)
        history_record(project=item.project, item=item, kind="stage", new={"stage": workflow.stage(stage).name})
        return f"stage:{workflow.stage(stage).name}"
    if workflow.stage(item.workflow_stage).gold == "references":
        routed = item_keep_references(item=item)
    else:
        routed = item_route(item=item)
    assignments_release(item=item)
    return routed


def item_flag(*, annotator, item: Item, reason: str, note: str = "") -> None:
    """An annotator sends the item they hold out of the dataset with a reason (MemeCap: offensive,
    sexual, hateful or uninterpretable); the reason is recorded in the item's history and shown
    in the datasheet's exclusion counts. The annotator learns nothing about other annotators."""
    with transaction.atomic():
        annotation = annotation_flag_record(annotator=annotator, item=item, reason=reason, note=note)
        history_record(
            project=annotation.item.project,
            item=annotation.item,
            kind="excluded",
            actor=annotator,
            new={"reason": annotation.item.excluded_reason, "stage": annotation.stage},
        )
