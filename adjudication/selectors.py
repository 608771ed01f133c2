"""Read paths for reviewers and leads. Reviewers see annotations as "Annotator 1/2/..." only:
no usernames, no candidate letters or model identities (SPEC section 4)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.core.exceptions import PermissionDenied
from django.http import Http404

from adjudication.models import AdjudicationTask, GoldRecord, HistoryEvent, LexiconVersion
from annotation.models import Annotation, AnnotationRevision
from annotation.selectors import FieldView, field_view
from projects.access import roles_of
from projects.fieldtypes import REGISTRY
from projects.models import Item, Project, Role


def _annotated(user, item: Item) -> bool:
    return Annotation.objects.filter(item=item, annotator=user, kind="annotation").exists()


def task_get_for_reviewer(*, user, project: Project, task_id) -> AdjudicationTask:
    """The task, if ``user`` may adjudicate it: a reviewer who did not annotate the item and
    who holds the task (or it is open, for them to claim)."""
    if Role.REVIEWER not in roles_of(user=user, project=project):
        raise PermissionDenied("Only reviewers adjudicate.")
    try:
        task = AdjudicationTask.objects.select_related("item", "item__project").get(item__project=project, pk=int(task_id))
    except (AdjudicationTask.DoesNotExist, ValueError, TypeError):
        raise Http404("No such adjudication") from None
    if _annotated(user, task.item):
        raise PermissionDenied("You annotated this item, so another reviewer adjudicates it.")
    if task.status == AdjudicationTask.Status.CLAIMED and task.reviewer_id != user.pk:
        raise PermissionDenied("Another reviewer is adjudicating this item.")
    return task


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
    rows = []
    for spec in schema.fields:
        name = spec["name"]
        ftype = REGISTRY[spec["type"]]
        shown = [v.get(name) for v in values]
        rows.append(FieldRow(
            name=name, label=spec.get("label", name), spec=spec, mark=task.comparison.get(name, "agree"),
            field=field_view(schema, spec, None), values=shown, displays=[ftype.display_text(spec, v) for v in shown],
        ))
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
        "task": task, "item": item, "rows": rows, "annotator_numbers": list(range(1, len(values) + 1)),
        "segments": _segments(item.text, mentions), "state": state,
    }


def review_queue_counts(*, project: Project, user) -> dict:
    mine_annotated = Annotation.objects.filter(annotator=user, kind="annotation").values("item")
    open_tasks = AdjudicationTask.objects.filter(item__project=project, status=AdjudicationTask.Status.OPEN)
    return {
        "open": open_tasks.exclude(item__in=mine_annotated).count(),
        "not_for_you": open_tasks.filter(item__in=mine_annotated).count(),
        "mine": AdjudicationTask.objects.filter(item__project=project, status=AdjudicationTask.Status.CLAIMED, reviewer=user).count(),
        "done_by_you": AdjudicationTask.objects.filter(item__project=project, status=AdjudicationTask.Status.DONE, reviewer=user).count(),
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
    for rev in AnnotationRevision.objects.filter(annotation__item=item).select_related("annotation__annotator", "saved_by"):
        events.append({"when": rev.saved_at, "kind": f"annotation v{rev.version} ({rev.status})",
                       "who": rev.annotation.annotator.username, "new": _json(rev.values), "old": "",
                       "note": rev.annotation.kind})
    for ev in HistoryEvent.objects.filter(item=item).select_related("actor"):
        events.append({"when": ev.created_at, "kind": ev.kind, "who": ev.actor.username if ev.actor else "system",
                       "old": _json(ev.old), "new": _json(ev.new), "note": ev.note})
    events.sort(key=lambda e: e["when"])
    schema = item.project.get_schema()
    gold = []
    for record in GoldRecord.objects.filter(item=item).select_related("decided_by").order_by("-revision"):
        view = GoldView(record=record)
        for spec in schema.fields:
            name = spec["name"]
            if name in record.values:
                view.rows.append((name, spec.get("label") or name,
                                  REGISTRY[spec["type"]].display_text(spec, record.values[name]),
                                  (record.provenance or {}).get(name) or {}))
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
