"""Read paths for reviewers and leads. Reviewers see annotations as "Annotator 1/2/..." only:
no usernames, no candidate letters or model identities (SPEC section 4)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations

from django.core.exceptions import PermissionDenied
from django.http import Http404

from adjudication.models import AdjudicationTask, GoldRecord, HistoryEvent, LexiconVersion
from annotation.models import Annotation, AnnotationRevision
from annotation.selectors import FieldView, field_view
from projects.access import roles_of
from projects.fieldtypes import REGISTRY
from projects.models import Item, Project, Role
from projects.schema import DEFAULT_THRESHOLDS


def _annotated(user, item: Item) -> bool:
    return Annotation.objects.filter(item=item, annotator=user, kind="annotation").exists()


def task_get_for_reviewer(*, user, project: Project, task_id) -> AdjudicationTask:
    """The task, if ``user`` may adjudicate it: a reviewer who did not annotate the item and
    who holds the task (or it is open, for them to claim)."""
    if Role.REVIEWER not in roles_of(user=user, project=project):
        raise PermissionDenied("Only reviewers adjudicate.")
    try:
        task = AdjudicationTask.objects.select_related("item", "item__project").get(
            item__project=project, pk=int(task_id)
        )
    except (AdjudicationTask.DoesNotExist, ValueError, TypeError):
        raise Http404("No such adjudication") from None
    if _annotated(user, task.item):
        raise PermissionDenied("You annotated this item, so another reviewer adjudicates it.")
    if task.status == AdjudicationTask.Status.CLAIMED and task.reviewer_id != user.pk:
        raise PermissionDenied("Another reviewer is adjudicating this item.")
    return task


@dataclass(frozen=True)
class Similarity:
    """How close two annotators' values of a field are, by the field type's own measure, beside
    the project's threshold for it (what routed the item here)."""

    pair: str
    measure: str
    score: float | None
    threshold: float | None

    @property
    def within(self) -> bool | None:
        if self.score is None or self.threshold is None:
            return None
        return self.score >= self.threshold

    @property
    def text(self) -> str:
        if self.score is None:
            return f"{self.measure}"
        shown = f"{self.measure} {self.score:.2f}"
        if self.threshold is not None:
            shown += f" {'≥' if self.within else '<'} {self.threshold:.2f}"
        return shown


def project_thresholds(project: Project) -> dict:
    """SPEC section 3 defaults merged with the project's own (a spec's ``threshold`` wins per field)."""
    return {**DEFAULT_THRESHOLDS, **(project.thresholds or {})}


def field_similarities(spec: dict, values: list, *, thresholds: dict, lexicon: dict | None) -> list[Similarity]:
    """One figure per annotator pair ("1–2", "1–3", ...) for one field."""
    ftype = REGISTRY[spec["type"]]
    key = ftype.threshold_key
    threshold = spec.get("threshold", thresholds.get(key)) if key else None
    out = []
    for (i, a), (j, b) in combinations(enumerate(values, start=1), 2):
        pair = f"{i}–{j}"
        if ftype.is_absent(spec, a) and ftype.is_absent(spec, b):
            out.append(Similarity(pair, "both empty", None, None))
            continue
        try:
            score = ftype.similarity(spec, a, b, lexicon=lexicon)
        except (TypeError, ValueError, KeyError):
            score = None
        if score is None or not key:
            same = (
                not ftype.is_absent(spec, a)
                and not ftype.is_absent(spec, b)
                and ftype.canonical(spec, a) == ftype.canonical(spec, b)
            )
            out.append(Similarity(pair, "same" if same else "different", None, None))
        else:
            out.append(Similarity(pair, ftype.agreement.measure or ftype.agreement.metric, float(score), threshold))
    return out


@dataclass
class FieldRow:
    name: str
    label: str
    spec: dict
    mark: str
    #: The field as the "Edit" cell renders it (the same widget as the annotation workspace).
    field: FieldView
    values: list = field(default_factory=list)
    #: The type's display_text of each annotator's value.
    displays: list = field(default_factory=list)
    similarities: list = field(default_factory=list)


def _segments(text: str, mentions: list[str | None]) -> list[tuple[str, str]]:
    """Split ``text`` into (chunk, css classes) with each annotator's mention highlighted."""
    bounds = {0, len(text)}
    spans = []
    for k, m in enumerate(mentions, start=1):
        if m:
            start = text.find(m)
            if start >= 0:
                spans.append((start, start + len(m), k))
                bounds.update((start, start + len(m)))
    cuts = sorted(bounds)
    out = []
    for a, b in zip(cuts, cuts[1:]):
        ks = [k for s, e, k in spans if s <= a and b <= e]
        out.append((text[a:b], " ".join(f"m{k}" for k in ks)))
    return out


def review_context(*, task: AdjudicationTask) -> dict:
    item = task.item
    schema = item.project.get_schema()
    by_id = Annotation.objects.in_bulk(task.annotation_ids)
    values = [by_id[i].values for i in task.annotation_ids if i in by_id]
    thresholds = project_thresholds(item.project)
    lexicon = lexicon_entries(item.project)
    rows = []
    for spec in schema.fields:
        name = spec["name"]
        ftype = REGISTRY[spec["type"]]
        shown = [v.get(name) for v in values]
        rows.append(
            FieldRow(
                name=name,
                label=spec.get("label", name),
                spec=spec,
                mark=task.comparison.get(name, "agree"),
                field=field_view(schema, spec, None),
                values=shown,
                displays=[ftype.display_text(spec, v) for v in shown],
                similarities=field_similarities(spec, shown, thresholds=thresholds, lexicon=lexicon),
            )
        )
    mention_fields = [s["name"] for s in schema.fields if "mention" in REGISTRY[s["type"]].roles]
    mentions = [v.get(mention_fields[0]) for v in values] if mention_fields else []
    box_fields = [s["name"] for s in schema.fields if "region" in REGISTRY[s["type"]].roles]
    state = {
        "version": task.version,
        "draft": task.draft or {},
        "comparison": task.comparison,
        "annotators": [{"k": k, "values": v} for k, v in enumerate(values, start=1)],
        "boxField": box_fields[0] if box_fields else None,
    }
    return {
        "task": task,
        "item": item,
        "rows": rows,
        "annotator_numbers": list(range(1, len(values) + 1)),
        "segments": _segments(item.text, mentions),
        "state": state,
    }


#: Answers "up to when is this project's gold published?" (the newest release's build time, or
#: None). exports, above adjudication in the layers, registers one in its AppConfig.ready();
#: adjudication cannot import it.
RELEASE_TIME_SOURCES: list[Callable[[Project], datetime | None]] = []


def released_until(project: Project) -> datetime | None:
    """Gold records created up to this time may be in a published release (None: no release)."""
    times = [t for t in (source(project) for source in RELEASE_TIME_SOURCES) if t is not None]
    return max(times) if times else None


def gold_get_for_reviewer(*, user, project: Project, record_id) -> GoldRecord:
    """A gold record of ``project`` that ``user`` decided (404 otherwise: others' are not revealed)."""
    try:
        return GoldRecord.objects.select_related("item", "item__project", "task").get(
            pk=int(record_id), item__project=project, decided_by=user
        )
    except (GoldRecord.DoesNotExist, ValueError, TypeError):
        raise Http404("No such decision of yours") from None


@dataclass
class Decision:
    """One of the reviewer's own gold decisions, read-only, with whether it may still be revised."""

    record: GoldRecord
    rows: list
    published: bool

    @property
    def revisable(self) -> bool:
        return not self.published and self.record.item.stage == "gold"


def reviewer_decisions(*, project: Project, user, limit: int = 50) -> list[Decision]:
    """The reviewer's current gold decisions, newest first: two queries whatever the count."""
    schema = project.get_schema()
    until = released_until(project)
    records = (
        GoldRecord.objects.filter(item__project=project, decided_by=user, is_current=True, task__isnull=False)
        .select_related("item")
        .order_by("-created_at")[:limit]
    )
    out = []
    for record in records:
        rows = [
            (
                spec.get("label") or spec["name"],
                REGISTRY[spec["type"]].display_text(spec, record.values.get(spec["name"])),
            )
            for spec in schema.fields
            if spec["name"] in record.values
        ]
        out.append(Decision(record=record, rows=rows, published=until is not None and record.created_at <= until))
    return out


def lexicon_entries(project: Project) -> dict:
    """The project's current entity lexicon (variant -> canonical), as adjudication compares with it."""
    row = LexiconVersion.objects.filter(project=project).order_by("-version").only("entries").first()
    return dict(row.entries) if row else {}


def review_queue_counts(*, project: Project, user) -> dict:
    mine_annotated = Annotation.objects.filter(annotator=user, kind="annotation").values("item")
    open_tasks = AdjudicationTask.objects.filter(item__project=project, status=AdjudicationTask.Status.OPEN)
    return {
        "open": open_tasks.exclude(item__in=mine_annotated).count(),
        "not_for_you": open_tasks.filter(item__in=mine_annotated).count(),
        "mine": AdjudicationTask.objects.filter(
            item__project=project, status=AdjudicationTask.Status.CLAIMED, reviewer=user
        ).count(),
        "done_by_you": AdjudicationTask.objects.filter(
            item__project=project, status=AdjudicationTask.Status.DONE, reviewer=user
        ).count(),
    }


def _json(value) -> str:
    """A stored value as JSON text (``null``, ``[]``, ``"text"``), never a Python repr."""
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@dataclass
class GoldView:
    record: GoldRecord
    #: (field name, label, the type's display_text, provenance) in schema order.
    rows: list = field(default_factory=list)


def item_history(*, item: Item) -> dict:
    """Everything that happened to an item, for leads: annotation revisions (with annotator
    names: leads may see them), routing, gold revisions, send-backs. Values are JSON text."""
    events = []
    for rev in AnnotationRevision.objects.filter(annotation__item=item).select_related(
        "annotation__annotator", "saved_by"
    ):
        events.append(
            {
                "when": rev.saved_at,
                "kind": f"annotation v{rev.version} ({rev.status})",
                "who": rev.annotation.annotator.username,
                "new": _json(rev.values),
                "old": "",
                "note": rev.annotation.kind,
            }
        )
    for ev in HistoryEvent.objects.filter(item=item).select_related("actor"):
        events.append(
            {
                "when": ev.created_at,
                "kind": ev.kind,
                "who": ev.actor.username if ev.actor else "system",
                "old": _json(ev.old),
                "new": _json(ev.new),
                "note": ev.note,
            }
        )
    events.sort(key=lambda e: e["when"])
    schema = item.project.get_schema()
    gold = []
    for record in GoldRecord.objects.filter(item=item).select_related("decided_by").order_by("-revision"):
        view = GoldView(record=record)
        for spec in schema.fields:
            name = spec["name"]
            if name in record.values:
                view.rows.append(
                    (
                        name,
                        spec.get("label") or name,
                        REGISTRY[spec["type"]].display_text(spec, record.values[name]),
                        (record.provenance or {}).get(name) or {},
                    )
                )
        # Fields of an older schema version still show, as JSON.
        for name in sorted(set(record.values) - set(schema.names)):
            view.rows.append((name, name, _json(record.values[name]), (record.provenance or {}).get(name) or {}))
        gold.append(view)
    return {
        "events": events,
        "gold": gold,
        "open_task": AdjudicationTask.objects.filter(item=item, status__in=["open", "claimed"]).first(),
    }


def lexicon_versions(*, project: Project):
    return LexiconVersion.objects.filter(project=project).select_related("created_by").order_by("-version")


def items_for_lead(*, project: Project, stage: str | None = None, limit: int = 200):
    qs = Item.objects.filter(project=project).order_by("id")
    if stage:
        qs = qs.filter(stage=stage)
    return qs.only("id", "title", "text", "stage", "source_id")[:limit]
