"""Steps that span two pipeline stages (CONVENTIONS "Layers run one way").

Submitting the N-th annotation of an item moves the item on: annotation records the
submission, adjudication routes the item (gold when identical, auto-merge, or a reviewer's
queue). Neither app imports the other; this module calls both, in one transaction.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from adjudication.services import item_route
from annotation.models import Kind
from annotation.services import SaveResult, annotation_submit_record, assignments_release
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
            result.routed_to = item_route(item=result.annotation.item)
            assignments_release(item=result.annotation.item)
    return result
