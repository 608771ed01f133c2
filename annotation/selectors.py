"""Read paths of the annotation app.

Blindness is enforced here, not in templates (CONVENTIONS "Access"): what an annotator must not
see is never loaded into a response. An annotator's workspace is built from exactly their own
annotation, the item's own fields and anonymized candidates (letters + normalized fields);
another annotator's values, counts of their choices, gold and model identity are not queried at
all. The stored candidate ids of the provenance are stripped before anything leaves the server.
``submitted_annotations_for_item`` is for adjudication and quality code only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import Http404
from django.utils import timezone

from annotation.models import Annotation, AnnotatorPreference, Assignment, Kind, assignment_of, slot_held
from candidates.models import Conversion
from candidates.selectors import candidates_for_annotator
from core.rows import (
    adapt_time,
    alias_for,
    columns,
    fetch_rows,
    instances,
    model_from_row,
    reverse_one_to_one_from_row,
    values_of,
    width,
)
from projects.models import Item, ItemOcr, ItemVariant, Project, Stage
from projects.workflow import FLAG_REASONS, StageSpec

Status = Annotation.Status


#: The caller's annotation of one item of a project with its item and assignment (LEFT JOIN: it
#: may have none); their part in the latest stage they worked. Written out (core.rows): every
#: workspace page asks, and through the ORM it cost about 1 ms of CPU.
_OWN_ANNOTATION = (
    f"SELECT {columns(Annotation, 'a')}, {columns(Item, 'i')}, {columns(Assignment, 's')}"
    f' FROM "{Annotation._meta.db_table}" a INNER JOIN "{Item._meta.db_table}" i ON i."id" = a."item_id"'
    f' LEFT OUTER JOIN "{Assignment._meta.db_table}" s ON s."annotation_id" = a."id"'
    ' WHERE i."project_id" = %s AND a."item_id" = %s AND a."annotator_id" = %s AND a."kind" = %s'
    ' ORDER BY a."stage" DESC LIMIT 1'
)
_ITEM_AT = width(Annotation)
_ASSIGNMENT_AT = _ITEM_AT + width(Item)


def annotation_get_for_annotator(*, user, project: Project, item_id: Any, kind: str = Kind.ANNOTATION) -> Annotation:
    """The caller's own annotation of an item of ``project`` (already access-checked), with item
    and assignment; 404 when the item is not assigned to them (its existence is not revealed)."""
    try:
        pk = int(item_id)
    except (TypeError, ValueError):
        raise Http404("No such item") from None
    alias = alias_for(Annotation)
    found = fetch_rows(alias, _OWN_ANNOTATION, [project.pk, pk, user.pk, str(kind)])
    if not found:
        raise Http404("This item is not assigned to you")
    row = found[0]
    annotation = model_from_row(Annotation, row, alias=alias)
    annotation.item = model_from_row(Item, row, start=_ITEM_AT, alias=alias)
    reverse_one_to_one_from_row(annotation, "assignment", row, start=_ASSIGNMENT_AT, alias=alias)
    annotation.item.project = project
    annotation.annotator = user
    return annotation


def item_reference(*, project: Project, item_id: Any) -> Item:
    """An item of ``project`` (already access-checked) by id, not read: for the writes that lock
    the item themselves (annotation.services.saves), which look it up within ``project`` under
    the lock and refuse with 404 an item that is not the caller's. Nothing but ``pk`` and
    ``project`` may be read from it."""
    try:
        pk = int(item_id)
    except (TypeError, ValueError):
        raise Http404("No such item") from None
    return Item(pk=pk, project=project)


def annotation_item_check(*, user, item) -> None:
    """An annotator sees an item's (anonymized) candidates only for an item they hold or held:
    the annotation workspace's own items, not any item of the project by id."""
    if not Annotation.objects.filter(item=item, annotator=user, kind=Kind.ANNOTATION).exists():
        raise PermissionDenied("This item is not in your annotation queue.")


def browser_provenance(provenance: dict | None) -> dict:
    """Provenance as the annotator's browser may see it: the letter and edited flag, never the candidate id."""
    return {
        name: {"letter": entry.get("letter"), "edited": bool(entry.get("edited"))}
        for name, entry in (provenance or {}).items()
        if isinstance(entry, dict) and entry.get("letter")
    }


def holds_slot(annotation: Annotation, *, now: datetime | None = None) -> bool:
    if getattr(annotation, "holds_slot", None) is not None:
        return annotation.holds_slot
    assignment = assignment_of(annotation)
    if assignment is None:
        return False
    return slot_held(assignment.status, assignment.expires_at, now or timezone.now())


def is_editable(annotation: Annotation) -> bool:
    if annotation.status == Status.SKIPPED:
        return False
    return annotation.kind == Kind.AUDIT or (
        annotation.item.stage == Stage.ANNOTATING and annotation.item.workflow_stage == annotation.stage
    )


def annotation_schema(annotation: Annotation):
    """The part of the schema the annotation fills in: its workflow stage's fields."""
    return annotation.item.project.get_workflow().stage_schema(annotation.stage)


def current_values(schema, values: dict | None) -> dict:
    """Values restricted to the project's current schema, dropping any whose shape no longer
    fits its field (after a schema change), so a page never starts from something the server
    would refuse to save."""
    out = {}
    for name, value in (values or {}).items():
        spec = schema.by_name.get(name)
        if spec is not None and (value is None or schema.type_of(name).shape_error(spec, value) is None):
            out[name] = value
    return out


def annotation_state(annotation: Annotation) -> dict:
    """The JSON an annotator's browser gets about their own annotation."""
    schema = annotation_schema(annotation)
    return {
        "item_id": annotation.item_id,
        "kind": annotation.kind,
        "status": annotation.status,
        "version": annotation.version,
        "values": current_values(schema, annotation.working_values),
        "submitted_values": annotation.values if annotation.status == Status.SUBMITTED else None,
        "revision_pending": annotation.draft_values is not None,
        "provenance": browser_provenance(annotation.provenance),
        "editable": is_editable(annotation),
        "holds_slot": holds_slot(annotation),
        "updated_at": annotation.updated_at.isoformat() if annotation.updated_at else None,
    }


@dataclass(frozen=True)
class FieldView:
    """One schema field as a page renders it: the type's widget template with the type's widget
    config (never a switch on the widget or preset name)."""

    name: str
    label: str
    widget: str
    template: str
    help: str
    required: bool
    config: dict
    visible_if: dict | None
    visible: bool
    value: Any
    roles: frozenset = frozenset()

    @property
    def config_json(self) -> str:
        return json.dumps(self.config, ensure_ascii=False)

    @property
    def mention(self) -> bool:
        """Highlighted in the item text (the span of a text mention)."""
        return "mention" in self.roles

    @property
    def region(self) -> bool:
        """Drawn on the image (the boxes of a visual region)."""
        return "region" in self.roles


def field_view(schema, spec: dict, value: Any, *, visible: bool = True) -> FieldView:
    ftype = schema.type_of(spec["name"])
    return FieldView(
        name=spec["name"],
        label=spec.get("label") or spec["name"],
        widget=ftype.widget,
        template=ftype.template,
        help=spec.get("help", ""),
        required=bool(spec.get("required")),
        config=ftype.widget_config(spec),
        visible_if=spec.get("visible_if"),
        visible=visible,
        value=value,
        roles=ftype.roles,
    )


@dataclass(frozen=True)
class CandidateFieldView:
    name: str
    label: str
    value: Any
    #: The type's display_text of the value (escaped by the template).
    display: str
    #: Boxes previewed on the image while the "Use" button is hovered or focused.
    preview: bool = False


@dataclass(frozen=True)
class CandidateView:
    letter: str
    fields: list[CandidateFieldView]
    values: dict


@dataclass(frozen=True)
class EarlierStage:
    """What a stage shows from an earlier one (MemeCap: the literal caption in round 2): the
    values only, never who wrote them."""

    label: str
    fields: list[tuple[str, list[str]]]


@dataclass
class Workspace:
    annotation: Annotation
    item: Item
    fields: list[FieldView]
    candidates: list[CandidateView] = field(default_factory=list)
    audit: bool = False
    stage: StageSpec | None = None
    stages: int = 1
    earlier: list[EarlierStage] = field(default_factory=list)
    #: The stage's image variant exists for this item (projects.ocr); else the original shows.
    has_variant: bool = False
    #: OCR lines of the image [{text, box}], for the overlay (only where the stage shows text).
    ocr_lines: list[dict] = field(default_factory=list)
    #: A review stage: the automated checks' findings on the model's conversion (messages and
    #: the field they concern; never the provider or model that wrote it).
    checks: list[dict] = field(default_factory=list)

    @property
    def show_text(self) -> bool:
        return self.stage is None or self.stage.show_text

    @property
    def show_title(self) -> bool:
        return self.stage is None or self.stage.show_title

    @property
    def image_variant(self) -> str:
        return self.stage.image if self.stage is not None else "original"

    @property
    def variant_missing(self) -> bool:
        """The stage asks for a derived image the item does not have yet (OCR not run)."""
        return self.image_variant != "original" and not self.has_variant

    @property
    def flags(self) -> list[tuple[str, str]]:
        if self.audit or self.stage is None:
            return []
        return [(key, FLAG_REASONS[key]) for key in self.stage.flags]

    @cached_property
    def state(self) -> dict:
        return annotation_state(self.annotation)

    @property
    def has_region(self) -> bool:
        return any(f.region for f in self.fields)

    @property
    def has_mention(self) -> bool:
        return any(f.mention for f in self.fields)

    @property
    def candidate_rows(self) -> list[tuple[FieldView, list[tuple[str, CandidateFieldView | None]]]]:
        """Fields x candidates for the side-by-side table: (letter, field or None when the
        candidate lacks it, e.g. removed as malformed)."""
        rows = []
        for f in self.fields:
            cells = [(c.letter, next((cf for cf in c.fields if cf.name == f.name), None)) for c in self.candidates]
            if any(cf for _, cf in cells):
                rows.append((f, cells))
        return rows


def workspace_for_annotator(*, annotation: Annotation, audit: bool) -> Workspace:
    """Everything the annotation page shows: the fields of the annotation's workflow stage, what
    the stage shows from earlier ones, and (unless an audit, or a stage without candidates) the
    anonymized candidates."""
    item = annotation.item
    workflow = item.project.get_workflow()
    stage = workflow.stage(annotation.stage)
    schema = workflow.stage_schema(stage.index)
    values = {**schema.absent_values(), **current_values(schema, annotation.working_values)}
    fields = [
        field_view(schema, spec, values.get(spec["name"]), visible=schema.is_visible(spec, values))
        for spec in schema.fields
    ]
    candidates: list[CandidateView] = []
    if not audit and stage.candidates:
        for cand in candidates_for_annotator(item=item, user=annotation.annotator):
            shown = [
                CandidateFieldView(
                    name=f.name,
                    label=f.label,
                    value=cand.fields[f.name],
                    preview=f.region,
                    display=schema.type_of(f.name).display_text(schema.by_name[f.name], cand.fields[f.name]),
                )
                for f in fields
                if f.name in cand.fields
            ]
            candidates.append(CandidateView(letter=cand.letter, fields=shown, values={f.name: f.value for f in shown}))
    return Workspace(
        annotation=annotation,
        item=item,
        fields=fields,
        candidates=candidates,
        audit=audit,
        stage=stage,
        stages=len(workflow.stages),
        earlier=[] if audit else _earlier_stages(item=item, workflow=workflow, stage=stage),
        has_variant=stage.image != "original" and ItemVariant.objects.filter(item=item, kind=stage.image).exists(),
        ocr_lines=_ocr_lines(item) if stage.show_text else [],
        checks=[] if audit else _review_checks(item=item, stage=stage, schema=schema),
    )


def _review_checks(*, item: Item, stage, schema) -> list[dict]:
    if stage.review is None:
        return []
    flags = Conversion.objects.filter(item=item, stage=stage.review).values_list("flags", flat=True).first() or []
    out = []
    for f in flags:
        if not isinstance(f, dict):
            continue
        spec = schema.by_name.get(f.get("field"))
        out.append(
            {
                "check": str(f.get("check", "")),
                "field": (spec.get("label") or spec["name"]) if spec else "",
                "message": str(f.get("message", "")),
            }
        )
    return out


#: Written out (core.rows): every page of a stage that shows the text asks, mostly for nothing.
_OCR_LINES = f'SELECT o."lines" FROM "{ItemOcr._meta.db_table}" o WHERE o."item_id" = %s ORDER BY o."id" ASC LIMIT 1'


def _ocr_lines(item: Item) -> list[dict]:
    """The OCR boxes of the item's image for the overlay: text and box (0..1000) only."""
    alias = alias_for(ItemOcr)
    found = fetch_rows(alias, _OCR_LINES, [item.pk])
    lines = (values_of(ItemOcr, ("lines",), found[0], alias=alias)[0] if found else None) or []
    out = []
    for line in lines:
        box = line.get("box") if isinstance(line, dict) else None
        if not (isinstance(box, list) and len(box) == 4 and all(isinstance(v, int) for v in box)):
            continue
        x1, y1, x2, y2 = box
        out.append({"text": str(line.get("text", "")), "x": x1, "y": y1, "w": max(x2 - x1, 1), "h": max(y2 - y1, 1)})
    return out


def _earlier_stages(*, item: Item, workflow, stage) -> list[EarlierStage]:
    """The submitted values of the earlier stages this stage shows, in order of submission,
    without their authors (the stage's definition asks for them: projects.workflow)."""
    if not stage.show_stages:
        return []
    rows = (
        Annotation.objects.filter(item=item, kind=Kind.ANNOTATION, status=Status.SUBMITTED, stage__in=stage.show_stages)
        .order_by("stage", "first_submitted_at", "id")
        .values_list("stage", "values")
    )
    by_stage: dict[int, list[dict]] = {}
    for index, values in rows:
        by_stage.setdefault(index, []).append(values)
    out = []
    for index in stage.show_stages:
        earlier, schema = workflow.stage(index), workflow.stage_schema(index)
        shown = []
        for spec in schema.fields:
            ftype = schema.type_of(spec["name"])
            texts = [ftype.display_text(spec, v.get(spec["name"])) for v in by_stage.get(index, [])]
            shown.append((spec.get("label") or spec["name"], texts))
        out.append(EarlierStage(label=earlier.label, fields=shown))
    return out


#: A BCP 47-looking language tag: only such an item language becomes the text's lang attribute.
_LANG_TAG = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$")


def item_lang(item: Item) -> str:
    """The item's language as an HTML lang attribute, or "" when it does not look like a tag."""
    return item.language if _LANG_TAG.match(item.language or "") else ""


def session_start(user):
    """Start of the annotator's session for the welfare cap: their most recent login."""
    return user.last_login or user.date_joined


def session_count(*, user, project: Project) -> int:
    """Items the annotator finished (first submission or skip) in ``project`` since login.

    Skips count too: the cap limits exposure to the content, and a skipped item was seen.
    """
    since = session_start(user)
    return Annotation.objects.filter(
        Q(first_submitted_at__gte=since) | Q(status=Status.SKIPPED, updated_at__gte=since),
        annotator=user,
        item__project=project,
        kind=Kind.ANNOTATION,
    ).count()


@dataclass(frozen=True)
class Progress:
    done_today: int
    session_count: int
    session_cap: int
    remaining: int

    @property
    def cap_reached(self) -> bool:
        return bool(self.session_cap) and self.session_count >= self.session_cap


#: Done today and done this session (first submissions, and skips since the session start).
#: COUNT(CASE ...) rather than FILTER: the same on PostgreSQL, and SQLite of any version.
_PROGRESS_COUNTS = (
    'SELECT COUNT(CASE WHEN a."first_submitted_at" >= %s THEN 1 END),'
    ' COUNT(CASE WHEN a."first_submitted_at" >= %s OR (a."status" = %s AND a."updated_at" >= %s) THEN 1 END)'
    f' FROM "{Annotation._meta.db_table}" a INNER JOIN "{Item._meta.db_table}" i ON i."id" = a."item_id"'
    ' WHERE a."annotator_id" = %s AND i."project_id" = %s AND a."kind" = %s'
)
#: Items still open to the annotator: annotating, never theirs, and not yet held by as many
#: live claims (submitted, or active and not expired) as the project has slots per item.
_PROGRESS_REMAINING = (
    f'SELECT COUNT(*) FROM "{Item._meta.db_table}" i WHERE i."project_id" = %s AND i."stage" = %s'
    f' AND NOT (i."id" IN (SELECT m."item_id" FROM "{Annotation._meta.db_table}" m'
    ' WHERE m."annotator_id" = %s AND m."kind" = %s))'
    f' AND NOT (i."id" IN (SELECT s."item_id" FROM "{Assignment._meta.db_table}" s'
    ' WHERE (s."status" = %s OR (s."expires_at" > %s AND s."status" = %s)) AND s."kind" = %s AND s."project_id" = %s'
    ' GROUP BY s."item_id" HAVING COUNT(s."id") >= %s))'
)


def annotator_progress(*, user, project: Project) -> Progress:
    """Done today, done this session and items still open to the annotator: two queries,
    written out (core.rows: the panel is polled after every submit; the ORM spent most of its
    CPU compiling them)."""
    now = timezone.now()
    today = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    since = session_start(user)
    alias = alias_for(Annotation)
    today, since, now = (adapt_time(alias, t) for t in (today, since, now))  # as the ORM passes a time
    ((done_today, session),) = fetch_rows(
        alias, _PROGRESS_COUNTS, [today, since, Status.SKIPPED, since, user.pk, project.pk, Kind.ANNOTATION]
    )
    ((remaining,),) = fetch_rows(
        alias,
        _PROGRESS_REMAINING,
        [
            project.pk,
            Stage.ANNOTATING,
            user.pk,
            Kind.ANNOTATION,
            Assignment.Status.SUBMITTED,
            now,
            Assignment.Status.ACTIVE,
            Kind.ANNOTATION,
            project.pk,
            project.annotators_per_item,
        ],
    )
    return Progress(
        done_today=done_today,
        session_count=session,
        session_cap=project.session_item_cap,
        remaining=remaining,
    )


def annotator_worklist(*, user, project: Project, limit: int = 50):
    """The annotator's own drafts and revisable submissions (items still being annotated)."""
    return (
        Annotation.objects.filter(
            annotator=user,
            item__project=project,
            kind=Kind.ANNOTATION,
            item__stage=Stage.ANNOTATING,
            status__in=[Status.DRAFT, Status.SUBMITTED],
        )
        .select_related("item")
        .order_by("status", "-updated_at")[:limit]
    )


def audit_worklist(*, user, project: Project, limit: int = 200):
    return (
        Annotation.objects.filter(annotator=user, item__project=project, kind=Kind.AUDIT)
        .select_related("item")
        .order_by("status", "item_id")[:limit]
    )


def audit_next_open(*, user, project: Project) -> Annotation | None:
    """The auditor's first audit still open to them (a draft), in worklist order."""
    return (
        Annotation.objects.filter(annotator=user, item__project=project, kind=Kind.AUDIT, status=Status.DRAFT)
        .order_by("item_id")
        .first()
    )


#: One row at most (unique per user and project). Written out (core.rows): the workspace page
#: and "next" ask on every request, and the ORM spent 0.5 ms of CPU building this query.
_PREFERENCE = (
    f'SELECT {columns(AnnotatorPreference, "a")} FROM "{AnnotatorPreference._meta.db_table}" a'
    ' WHERE a."user_id" = %s AND a."project_id" = %s'
)


def annotator_preference(*, user, project: Project) -> AnnotatorPreference | None:
    found = instances(AnnotatorPreference, _PREFERENCE, [user.pk, project.pk])
    return found[0] if found else None


def submitted_annotations_for_item(*, item: Item, kind: str = Kind.ANNOTATION) -> list[Annotation]:
    """Submitted annotations of an item, oldest first (adjudication and quality code only:
    never call this from an annotator's view)."""
    return list(
        Annotation.objects.filter(item=item, kind=kind, status=Status.SUBMITTED)
        .select_related("annotator")
        .order_by("first_submitted_at", "id")
    )
