"""Study setup steps whose effect depends on work already done (CONVENTIONS "Layers run one
way"): a schema change and the annotators-per-item setting are explained against existing
annotations before they are saved, and members' progress counts their annotations. projects
owns the settings; annotation and adjudication own the work; this module reads both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Count, Max, Q, Sum

from adjudication.models import AdjudicationTask, GoldRecord
from annotation.models import Annotation, Kind
from core.errors import Conflict, Invalid, StaleVersion
from projects.fieldtypes import SchemaError
from projects.models import Item, Project, Role, Stage
from projects.schema import Schema
from projects.schema_io import schema_check
from projects.services import project_schema_update, project_settings_save, settings_clean
from projects.workflow import Workflow
from workflow.services import _route

Status = Annotation.Status
MAX_LISTED = 50


@dataclass
class SchemaImpact:
    """What a schema change does to work already saved."""

    annotations_checked: int = 0
    gold_checked: int = 0
    #: [{"kind": "annotation" | "gold", "id", "item_id", "annotator", "errors": {field: message}}], the first MAX_LISTED
    invalid: list[dict] = field(default_factory=list)
    invalid_annotations: int = 0
    invalid_gold: int = 0
    by_field: dict[str, int] = field(default_factory=dict)
    started: bool = False

    @property
    def invalid_total(self) -> int:
        return self.invalid_annotations + self.invalid_gold

    def as_dict(self) -> dict:
        return {
            "started": self.started,
            "annotations_checked": self.annotations_checked,
            "gold_checked": self.gold_checked,
            "invalid_annotations": self.invalid_annotations,
            "invalid_gold": self.invalid_gold,
            "by_field": self.by_field,
            "invalid": self.invalid,
        }


def schema_change_impact(*, project: Project, schema: dict) -> SchemaImpact:
    """Which submitted annotations and current gold records would not validate under ``schema``
    (each against the fields of its workflow stage). Raises Invalid when ``schema`` itself is not
    usable. The annotations are not changed: they keep the schema version they were made under."""
    clean = schema_check(schema)
    new = Schema(clean)
    try:
        workflow = Workflow.from_data(project.workflow or None, schema=new)
    except SchemaError as exc:
        raise Invalid(f"The workflow's stages do not fit this schema: {exc}", errors={"workflow": str(exc)})
    impact = SchemaImpact(started=Annotation.objects.filter(item__project=project).exists())
    rows = (
        Annotation.objects.filter(item__project=project, status=Status.SUBMITTED)
        .select_related("item", "annotator")
        .order_by("id")
        .iterator(chunk_size=500)
    )
    for a in rows:
        impact.annotations_checked += 1
        try:
            stage_schema = workflow.stage_schema(a.stage)
        except (IndexError, KeyError, SchemaError):
            stage_schema = new
        result = stage_schema.validate(a.values, item_text=a.item.text)
        if not result.ok:
            impact.invalid_annotations += 1
            _note(impact, "annotation", a.pk, a.item_id, a.annotator.username, result.errors)
    for g in GoldRecord.objects.filter(item__project=project, is_current=True).select_related("item").iterator(500):
        impact.gold_checked += 1
        if workflow.multi:  # references: lists of values per field, not one record
            continue
        result = new.validate(g.values, item_text=g.item.text)
        if not result.ok:
            impact.invalid_gold += 1
            _note(impact, "gold", g.pk, g.item_id, None, result.errors)
    return impact


def _note(impact: SchemaImpact, kind: str, pk: int, item_id: int, who: str | None, errors: dict) -> None:
    for name in errors:
        impact.by_field[name] = impact.by_field.get(name, 0) + 1
    if len(impact.invalid) < MAX_LISTED:
        impact.invalid.append({"kind": kind, "id": pk, "item_id": item_id, "annotator": who, "errors": errors})


def schema_change(*, project: Project, schema: dict, expected_version: int | None, confirm: bool = False):
    """Save a schema edited by a lead. Before any annotation exists the current version is
    rewritten; afterwards a new version is made (existing annotations keep theirs). When the
    change would make saved work invalid, nothing is saved unless ``confirm``: Conflict carries
    the impact, so the page and the API can list it first."""
    current = Project.objects.values_list("schema_version", flat=True).get(pk=project.pk)
    if expected_version is not None and expected_version != current:  # checked again under the lock
        raise StaleVersion(
            f"The schema was changed elsewhere (now version {current}, you edited {expected_version}). "
            "Reload; your edits are still in the form."
        )
    impact = schema_change_impact(project=project, schema=schema)
    if impact.invalid_total and not confirm:
        raise SchemaChangeNeedsConfirmation(impact)
    project = project_schema_update(
        project=project, schema=schema, expected_version=expected_version, in_place=not impact.started
    )
    return project, impact


class SchemaChangeNeedsConfirmation(Conflict):
    code = "confirm"

    def __init__(self, impact: SchemaImpact):
        super().__init__(
            f"This change makes {impact.invalid_annotations} submitted annotation(s) and {impact.invalid_gold} gold "
            "record(s) invalid under the new schema. They keep the version they were made under; confirm to save.",
            errors={k: f"{n} record(s) would not validate" for k, n in impact.by_field.items()},
        )
        self.impact = impact

    def as_dict(self) -> dict:
        return {**super().as_dict(), "impact": self.impact.as_dict()}


# ---------------------------------------------------------------- study settings


def annotators_change_impact(*, project: Project, annotators_per_item: int) -> dict:
    """What changing annotators per item does, before it is saved (not silently applied)."""
    current = project.annotators_per_item
    counts = (
        Annotation.objects.filter(item__project=project, kind=Kind.ANNOTATION, status=Status.SUBMITTED)
        .values("item_id", "item__stage")
        .annotate(n=Count("id"))
    )
    over = [c for c in counts if c["n"] > annotators_per_item]
    ready = [c for c in counts if c["item__stage"] == Stage.ANNOTATING and c["n"] >= annotators_per_item]
    in_progress = Item.objects.filter(project=project, stage__in=[Stage.NEW, Stage.ANNOTATING]).count()
    lines = []
    if annotators_per_item < current:
        if over:
            lines.append(
                f"{len(over)} item(s) already have more than {annotators_per_item} submitted annotations: all are kept, "
                f"but only the first {annotators_per_item} count toward gold and agreement for items routed from now on."
            )
        if ready:
            lines.append(
                f"{len(ready)} item(s) being annotated already have {annotators_per_item} or more submissions: saving "
                "routes them at once (gold when identical, else to a reviewer)."
            )
        done = Item.objects.filter(project=project, stage__in=[Stage.GOLD, Stage.ADJUDICATION]).count()
        if done:
            lines.append(f"{done} item(s) already gold or in adjudication keep their result.")
    elif annotators_per_item > current:
        lines.append(
            f"{in_progress} item(s) not yet complete will wait for {annotators_per_item} annotators; items already gold "
            "or in adjudication keep their result."
        )
    return {
        "from": current,
        "to": annotators_per_item,
        "items_over": len(over),
        "items_ready": len(ready),
        "explanation": lines,
        "needs_confirmation": annotators_per_item < current and bool(over or ready),
    }


class SettingsNeedConfirmation(Conflict):
    code = "confirm"

    def __init__(self, impact: dict):
        super().__init__(
            " ".join(impact["explanation"]) + " Confirm to save.",
            errors={"annotators_per_item": " ".join(impact["explanation"])},
        )
        self.impact = impact

    def as_dict(self) -> dict:
        return {**super().as_dict(), "impact": self.impact}


def study_settings_update(*, project: Project, data: dict, confirm: bool = False) -> tuple[Project, dict | None]:
    """Check and save study settings. Lowering annotators per item below what items already
    have is explained and needs ``confirm``; a multi-stage workflow sets its own counts per
    stage (annotators per item is then refused, with the reason)."""
    clean = settings_clean(project=project, data=data)
    impact = None
    n = clean.get("annotators_per_item")
    if n is not None and n != project.annotators_per_item:
        if project.workflow:
            raise Invalid(
                "This project's workflow sets the annotators of each stage: change them there.",
                errors={"annotators_per_item": "set per stage by the workflow"},
            )
        impact = annotators_change_impact(project=project, annotators_per_item=n)
        if impact["needs_confirmation"] and not confirm:
            raise SettingsNeedConfirmation(impact)
    with transaction.atomic():
        project = project_settings_save(project=project, settings=clean)
        if impact and impact["items_ready"]:
            _route_ready_items(project=project)
    return project, impact


def _route_ready_items(*, project: Project) -> int:
    """Items that already have enough submissions after annotators per item went down.

    Locks: each item row (select_for_update), the same lock a submit takes, so a concurrent
    submit cannot route the item twice; the stage is re-checked under it."""
    n = project.annotators_per_item
    ids = (
        Annotation.objects.filter(
            item__project=project, item__stage=Stage.ANNOTATING, kind=Kind.ANNOTATION, status=Status.SUBMITTED
        )
        .values("item_id")
        .annotate(k=Count("id"))
        .filter(k__gte=n)
        .values_list("item_id", flat=True)
    )
    routed = 0
    for item_id in list(ids):
        item = Item.objects.select_for_update().select_related("project").get(pk=item_id)
        if item.stage == Stage.ANNOTATING:
            _route(item)
            routed += 1
    return routed


# ---------------------------------------------------------------- members' progress


def member_progress(*, project: Project) -> dict[int, dict[str, Any]]:
    """Per person: submitted annotations, skipped, drafts, active time, last submission, audits
    and adjudications (one grouped query each; deactivated members are counted too)."""
    rows = (
        Annotation.objects.filter(item__project=project)
        .values("annotator_id")
        .annotate(
            submitted=Count("id", filter=Q(kind=Kind.ANNOTATION, status=Status.SUBMITTED)),
            skipped=Count("id", filter=Q(kind=Kind.ANNOTATION, status=Status.SKIPPED)),
            drafts=Count("id", filter=Q(kind=Kind.ANNOTATION, status=Status.DRAFT)),
            audits=Count("id", filter=Q(kind=Kind.AUDIT, status=Status.SUBMITTED)),
            time_ms=Sum("time_spent_ms", filter=Q(status=Status.SUBMITTED)),
            last=Max("first_submitted_at"),
        )
    )
    out: dict[int, dict[str, Any]] = {r["annotator_id"]: {**r, "decided": 0} for r in rows}
    for r in (
        AdjudicationTask.objects.filter(item__project=project, status=AdjudicationTask.Status.DONE)
        .values("reviewer_id")
        .annotate(n=Count("id"))
    ):
        out.setdefault(
            r["reviewer_id"], {"submitted": 0, "skipped": 0, "drafts": 0, "audits": 0, "time_ms": 0, "last": None}
        )["decided"] = r["n"]
    total_items = Item.objects.filter(project=project).exclude(stage=Stage.EXCLUDED).count()
    for entry in out.values():
        ms = entry.get("time_ms") or 0
        entry["minutes"] = round(ms / 60000, 1)
        entry["per_item_s"] = round(ms / 1000 / entry["submitted"], 1) if entry.get("submitted") else None
        entry["share"] = round(100 * entry.get("submitted", 0) / total_items, 1) if total_items else 0.0
    return out


ROLES_WITH_PROGRESS = (Role.ANNOTATOR, Role.REVIEWER, Role.AUDITOR)
