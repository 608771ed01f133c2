"""Steps that span two pipeline stages (CONVENTIONS "Layers run one way").

Submitting the N-th annotation of an item moves the item on: annotation records the
submission, adjudication routes the item (gold when identical, auto-merge, or a reviewer's
queue). Neither app imports the other; this module calls both, in one transaction.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from adjudication.services import history_record, item_keep_references, item_route
from annotation.models import Annotation, Kind
from annotation.services import (
    SaveResult,
    annotation_flag_record,
    annotation_submit_record,
    assignments_release,
    item_stage_advance,
)
from candidates.models import Conversion, ConversionJob, Provider
from candidates.services.conversion import conversion_create, conversion_execute, conversion_job_ensure
from core.errors import Invalid
from core.jobs import Progress, job_finish
from core.models import JobStatus
from projects.models import Item, Project, Stage
from projects.services import project_settings_save, settings_clean

log = logging.getLogger(__name__)
#: Seconds a transient provider error waits per attempt before the conversion is tried again.
RETRY_BACKOFF = 2.0


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
        if workflow.stage(stage).model is not None:
            conversion_create(item=item, stage=workflow.stage(stage))
        return f"stage:{workflow.stage(stage).name}"
    if workflow.stage(item.workflow_stage).gold != "adjudicate":
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
            new={
                "reason": annotation.item.excluded_reason,
                "flag": reason,
                "stage": annotation.stage,
                "stage_name": annotation.item.project.get_workflow().stage(annotation.stage).name,
            },
        )


# ---------------------------------------------------------------- model stages


def _source_values(item: Item, index: int) -> dict:
    row = (
        Annotation.objects.filter(item=item, kind=Kind.ANNOTATION, status=Annotation.Status.SUBMITTED, stage=index)
        .order_by("first_submitted_at", "id")
        .values_list("values", flat=True)
        .first()
    )
    return row or {}


def conversion_run(*, conversion_id: int) -> str:
    """Convert one item (candidates.services.conversion) and, when the reply was read, move the
    item on to the stage that reviews it. Returns the outcome ("done", "failed", "retry",
    "skipped"). The item lock is taken only for the move, never during the provider call."""
    conversion = Conversion.objects.select_related("item__project").filter(pk=conversion_id).first()
    if conversion is None:
        return "skipped"
    item = conversion.item
    workflow = item.project.get_workflow()
    if item.stage != Stage.ANNOTATING or item.workflow_stage != conversion.stage:
        # Removed by a lead, or moved on already: nothing to convert any more.
        Conversion.objects.filter(pk=conversion.pk, status__in=(JobStatus.PENDING, JobStatus.RUNNING)).update(
            status=JobStatus.CANCELLED, lease_until=None, error="the item left the stage"
        )
        return "skipped"
    stage = workflow.stage(conversion.stage)
    source = stage.model["source"]
    outcome = conversion_execute(
        conversion=conversion,
        stage=stage,
        schema=workflow.schema,
        source_schema=workflow.stage_schema(source),
        source_values=_source_values(item, source),
    )
    if outcome == "done":
        conversion_complete(conversion_id=conversion.pk)
    return outcome


def conversion_complete(*, conversion_id: int) -> bool:
    """A done conversion moves its item from the model stage to the next (its review).

    Locks: the item row (annotation.services' lock), re-checking under it that the item is
    still in the model stage, so a redelivered run cannot move it twice."""
    with transaction.atomic():
        conversion = Conversion.objects.filter(pk=conversion_id, status=JobStatus.DONE).first()
        if conversion is None:
            return False
        item = Item.objects.select_for_update(of=("self",)).select_related("project").get(pk=conversion.item_id)
        if item.stage != Stage.ANNOTATING or item.workflow_stage != conversion.stage:
            return False
        workflow = item.project.get_workflow()
        stage = item_stage_advance(item=item)
        history_record(
            project=item.project,
            item=item,
            kind="stage",
            new={"stage": workflow.stage(stage).name, "conversion": conversion.pk, "flags": len(conversion.flags)},
        )
    return True


def conversion_job_work(job: ConversionJob, progress: Progress) -> None:
    """The job's work: every pending conversion of the project, oldest first, until none is
    left; a transient error puts a conversion back with a growing wait. Ends the job, then
    ensures a new one when a conversion arrived meanwhile (see conversion_job_ensure)."""
    project = job.project
    done = 0
    while True:
        now = timezone.now()
        ids = list(
            Conversion.objects.filter(item__project=project)
            .filter(Q(status=JobStatus.PENDING) | Q(status=JobStatus.RUNNING, lease_until__lt=now))
            .order_by("updated_at", "id")
            .values_list("id", flat=True)[:500]
        )
        if not ids:
            break
        total = done + Conversion.objects.filter(item__project=project, status__in=(JobStatus.PENDING,)).count()
        for conversion_id in ids:
            progress(done, max(total, done + 1), phase="converting")
            outcome = conversion_run(conversion_id=conversion_id)
            if outcome == "retry":
                attempts = Conversion.objects.filter(pk=conversion_id).values_list("attempts", flat=True).first() or 1
                time.sleep(RETRY_BACKOFF * attempts)
            elif outcome != "skipped":
                done += 1
    job_finish(job)
    conversion_job_ensure(project=project)


def conversion_provider_set(*, project, user, stage_name: str, provider: str) -> None:
    """A lead picks the provider a model stage converts with (by name; empty: the project's
    only enabled provider). Written into the stage data and recorded in the history."""
    if provider and not Provider.objects.filter(project=project, name=provider).exists():
        raise Invalid("Choose one of the project's providers.", errors={"provider": f"no provider {provider!r}"})
    with transaction.atomic():
        locked = Project.objects.select_for_update().get(pk=project.pk)
        data = copy.deepcopy(locked.workflow or [])
        stage = next((s for s in data if s.get("name") == stage_name and isinstance(s.get("model"), dict)), None)
        if stage is None:
            raise Invalid("This stage is not run by a model.", errors={"stage": f"no model stage {stage_name!r}"})
        old = stage["model"].get("provider", "")
        stage["model"]["provider"] = provider
        project_settings_save(project=locked, settings=settings_clean(project=locked, data={"workflow": data}))
        history_record(
            project=locked,
            item=None,
            kind="settings",
            actor=user,
            old={"stage": stage_name, "provider": old},
            new={"stage": stage_name, "provider": provider},
        )
    project.workflow = data


FAILED_SHOWN = 200


def conversions_overview(*, project, workflow) -> list[dict]:
    """Per model stage, for its lead: status counts, items waiting for a conversion, failures
    (with their reason) and flagged conversions, and the provider it converts with. Two
    aggregate queries and two bounded lists per stage."""
    out = []
    for stage in workflow.model_stages():
        rows = Conversion.objects.filter(item__project=project, stage=stage.index)
        counts = dict(rows.values_list("status").annotate(n=Count("id")).order_by())
        converted = rows.filter(status=JobStatus.DONE)
        out.append(
            {
                "stage": stage,
                "counts": {s: counts.get(s, 0) for s in JobStatus.values},
                "total": sum(counts.values()),
                "flagged": sum(1 for f in converted.values_list("flags", flat=True) if f),
                "failed": list(
                    rows.filter(status=JobStatus.FAILED)
                    .select_related("item", "provider")
                    .order_by("item_id")[:FAILED_SHOWN]
                ),
                "flag_rows": list(
                    converted.exclude(flags=[]).select_related("item", "provider").order_by("item_id")[:FAILED_SHOWN]
                ),
                "provider": stage.model.get("provider") or "",
            }
        )
    return out
