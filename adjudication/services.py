"""Routing, adjudication and gold records (SPEC section 1 step 3, section 3 "Disagreement").

Every write path for gold, adjudication tasks and the lexicon is here, in one transaction with
the item's stage change and its history event.
"""

from __future__ import annotations

import csv
import io
from itertools import combinations

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from adjudication.models import AdjudicationTask, GoldRecord, HistoryEvent, LexiconVersion
from adjudication.selectors import released_until
from annotation.models import Annotation
from annotation.selectors import submitted_annotations_for_item
from candidates.models import Conversion
from core.errors import Conflict, Invalid, StaleVersion
from metrics.entity import Lexicon
from metrics.text import normalize
from projects.fieldtypes import AGREE, DISAGREE, MINOR, REGISTRY
from projects.models import Item, Project, Stage
from projects.presets import PRESETS

_RANK = {AGREE: 0, MINOR: 1, DISAGREE: 2}
ROUTE_WAITING, ROUTE_GOLD, ROUTE_ADJUDICATION = "waiting", "gold", "adjudication"
MAX_LEXICON_ENTRIES = 20000


def history_record(
    *, project: Project, item: Item | None, kind: str, actor=None, old=None, new=None, note: str = ""
) -> None:
    HistoryEvent.objects.create(project=project, item=item, kind=kind, actor=actor, old=old, new=new, note=note)


# ---------------------------------------------------------------- lexicon


def lexicon_current(*, project: Project) -> tuple[int | None, dict[str, str]]:
    row = LexiconVersion.objects.filter(project=project).order_by("-version").first()
    return (row.version, dict(row.entries)) if row else (None, {})


def lexicon_check(entries: dict) -> dict[str, str]:
    """Validate a variant -> canonical mapping; raise Invalid naming each bad entry."""
    if not isinstance(entries, dict):
        raise Invalid("The lexicon must map variants to canonical forms.")
    if len(entries) > MAX_LEXICON_ENTRIES:
        raise Invalid(f"A lexicon has at most {MAX_LEXICON_ENTRIES} entries.")
    errors, clean = [], {}
    for variant, canonical in entries.items():
        if not isinstance(variant, str) or not isinstance(canonical, str):
            errors.append(f"{variant!r}: variant and canonical form must be text")
            continue
        v, c = variant.strip(), canonical.strip()
        if not v or not c:
            errors.append(f"{variant!r} -> {canonical!r}: empty variant or canonical form")
        elif len(v) > 200 or len(c) > 200:
            errors.append(f"{v[:40]!r}: longer than 200 characters")
        elif not normalize(v) or not normalize(c):
            errors.append(f"{v!r} -> {c!r}: nothing left after normalization (only punctuation or articles)")
        else:
            clean[v] = c
    if not errors:
        try:
            Lexicon(clean)  # conflicts (two spellings of one variant) and chains
        except ValueError as exc:
            errors.append(str(exc))
    if errors:
        raise Invalid(
            "Some lexicon entries cannot be used.", errors={f"entry {i + 1}": e for i, e in enumerate(errors)}
        )
    return clean


def lexicon_save(*, project: Project, entries: dict, user=None, note: str = "") -> LexiconVersion:
    clean = lexicon_check(entries)
    with transaction.atomic():
        Project.objects.select_for_update().filter(pk=project.pk).first()
        old_version, old = lexicon_current(project=project)
        if old_version is not None and old == clean:
            return LexiconVersion.objects.get(project=project, version=old_version)
        row = LexiconVersion.objects.create(
            project=project, version=(old_version or 0) + 1, entries=clean, created_by=user, change_note=note[:300]
        )
        added = {k: v for k, v in clean.items() if old.get(k) != v}
        history_record(
            project=project,
            item=None,
            kind="lexicon",
            actor=user,
            old={"version": old_version, "removed_or_changed": {k: old[k] for k in old if clean.get(k) != old[k]}},
            new={"version": row.version, "added_or_changed": added},
            note=note,
        )
    return row


def lexicon_parse_csv(text: str) -> tuple[dict[str, str], list[str]]:
    """Parse 'variant,canonical' rows (header optional). Returns (entries, row errors)."""
    entries, errors = {}, []
    reader = csv.reader(io.StringIO(text))
    for n, row in enumerate(reader, start=1):
        if not row or all(not c.strip() for c in row):
            continue
        if n == 1 and [c.strip().lower() for c in row[:2]] == ["variant", "canonical"]:
            continue
        if len(row) != 2:
            errors.append(f"row {n}: expected 2 columns (variant, canonical), got {len(row)}")
            continue
        entries[row[0].strip()] = row[1].strip()
    return entries, errors


def lexicon_to_csv(entries: dict[str, str]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["variant", "canonical"])
    for v in sorted(entries, key=str.casefold):
        w.writerow([v, entries[v]])
    return out.getvalue()


def lexicon_seed(*, project: Project) -> LexiconVersion | None:
    """Seed a new project's lexicon from its preset (meme3w: the paper's Table 8 same-form
    pairs), once. Connected to projects.hooks.project_created."""
    seed = PRESETS.get(project.preset, {}).get("lexicon")
    if not seed or LexiconVersion.objects.filter(project=project).exists():
        return None
    return lexicon_save(project=project, entries=dict(seed["entries"]), note=seed["note"])


# ---------------------------------------------------------------- routing


def compare_annotations(*, project: Project, values: list[dict], lexicon: dict | None) -> dict[str, str]:
    """Worst per-field outcome over every annotator pair."""
    schema = project.get_schema()
    worst = dict.fromkeys(schema.names, AGREE)
    for a, b in combinations(values, 2):
        for name, outcome in schema.compare(a, b, thresholds=project.thresholds, lexicon=lexicon).items():
            if _RANK[outcome] > _RANK[worst[name]]:
                worst[name] = outcome
    return worst


def item_route(*, item: Item) -> str:
    """Called (inside the submitting transaction) when an item may have all N submissions.

    Identical => gold (provenance ``identical``); only minor differences that the project's
    auto-merge rules settle => gold (provenance ``auto-merge`` + rule); anything else => the
    adjudication queue with each field marked agree / minor / disagree.
    """
    project = item.project
    annotations = submitted_annotations_for_item(item=item)
    if len(annotations) < project.annotators_per_item:
        return ROUTE_WAITING
    annotations = annotations[: project.annotators_per_item]
    lexicon_version, lexicon = lexicon_current(project=project)
    values = [a.values for a in annotations]
    comparison = compare_annotations(project=project, values=values, lexicon=lexicon)
    schema = project.get_schema()
    rules = set(project.auto_merge_rules or [])
    gold, provenance = {}, {}
    settled: dict[str, dict] = {}
    needs_review = False
    for spec in schema.fields:
        name = spec["name"]
        outcome = comparison[name]
        if outcome == AGREE:
            gold[name] = values[0].get(name, REGISTRY[spec["type"]].absent(spec))
            provenance[name] = {"source": "identical"}
            continue
        if "majority" in rules and len(values) >= 3:
            winner = majority_value(spec, [v.get(name) for v in values])
            if winner is not None:
                gold[name], pick, votes = winner
                provenance[name] = {"source": "majority", "votes": votes, "of": len(values)}
                settled[name] = {"pick": pick, "votes": votes, "of": len(values)}
                continue
        merged = None
        if outcome == MINOR and rules:
            merged = REGISTRY[spec["type"]].auto_merge(
                spec, [v.get(name) for v in values], rules=rules, lexicon=lexicon
            )
        if merged is None:
            needs_review = True
            continue
        gold[name], rule = merged
        provenance[name] = {"source": "auto-merge", "rule": rule}
    if not needs_review:
        check = schema.validate(gold, item_text=item.text)
        if check.ok:
            _gold_write(
                item=item,
                values=check.values,
                provenance=provenance,
                note="",
                decided_by=None,
                task=None,
                lexicon_version=lexicon_version,
                kind="gold:auto",
            )
            return ROUTE_GOLD
        needs_review = True  # a merge that breaks a rule goes to a person
    # Fields a strict majority settled stay settled (provenance "majority"): the reviewer sees
    # them picked and decides only the rest, unless they override a pick.
    task = AdjudicationTask.objects.create(
        item=item,
        comparison=comparison,
        annotation_ids=[a.pk for a in annotations],
        settled=settled,
        draft={"decisions": {n: {"pick": s["pick"]} for n, s in settled.items()}} if settled else {},
    )
    Item.objects.filter(pk=item.pk).update(stage=Stage.ADJUDICATION)
    item.stage = Stage.ADJUDICATION
    history_record(project=project, item=item, kind="routed", new={"comparison": comparison, "task": task.pk})
    return ROUTE_ADJUDICATION


def majority_value(spec: dict, values: list) -> tuple[object, int, int] | None:
    """The value a strict majority of annotators gave (AHA-Memes: 2 of 3), compared as the
    field type compares values (absent counts as a value of its own): (value, 1-based number
    of the first annotator who gave it, votes), or None without a strict majority."""
    ftype = REGISTRY[spec["type"]]
    groups: dict[object, list[int]] = {}
    for k, value in enumerate(values, start=1):
        try:
            key = ("absent",) if ftype.is_absent(spec, value) else ("value", _hashable(ftype.canonical(spec, value)))
        except (TypeError, ValueError):
            continue
        groups.setdefault(key, []).append(k)
    for members in groups.values():
        if len(members) * 2 > len(values):
            first = members[0]
            value = values[first - 1]
            return (ftype.absent(spec) if ftype.is_absent(spec, value) else value), first, len(members)
    return None


def _hashable(value):
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, set):
        return frozenset(_hashable(v) for v in value)
    return value


ROUTE_REFERENCES = "references"


def item_keep_references(*, item: Item) -> str:
    """The last stage of a references workflow is complete: every annotator's value of every
    field is kept, nothing is adjudicated (MemeCap's captions). Gold holds, per field, the list
    of submitted values in order of first submission; provenance names the annotations.

    A stage with gold ``value`` (one annotator) gives the value itself instead of a list. A
    model stage's fields take the values of the stage that reviewed them (MemeBench's QC'd
    checklists), with provenance saying whether the reviewer accepted the model's conversion
    as it was or edited it.

    Caller holds the item lock (workflow.services.annotation_submit)."""
    workflow = item.project.get_workflow()
    schema = workflow.schema
    by_stage: dict[int, list[Annotation]] = {}
    for a in submitted_annotations_for_item(item=item):
        by_stage.setdefault(a.stage, []).append(a)
    values, provenance = {}, {}
    for stage in workflow.stages:
        if stage.model is not None:
            continue  # its fields are written by the stage that reviews it
        kept = by_stage.get(stage.index, [])[: workflow.annotators_for(item, stage.index)]
        conversion = None
        if stage.review is not None:
            conversion = Conversion.objects.filter(item=item, stage=stage.review).first()
        for name in stage.fields:
            if stage.gold == "value":
                spec = schema.by_name[name]
                values[name] = kept[0].values.get(name) if kept else REGISTRY[spec["type"]].absent(spec)
            else:
                values[name] = [a.values.get(name) for a in kept]
            provenance[name] = {"source": "references", "stage": stage.name, "annotations": [a.pk for a in kept]}
            if stage.review is not None:
                spec = schema.by_name[name]
                model_value = (conversion.values if conversion else {}).get(name)
                provenance[name] |= {
                    "source": "review",
                    "reviewed": workflow.stage(stage.review).name,
                    "conversion": conversion.pk if conversion else None,
                    "edited": not _same(spec, values[name], model_value),
                }
    lexicon_version, _ = lexicon_current(project=item.project)
    _gold_write(
        item=item,
        values=values,
        provenance=provenance,
        note="",
        decided_by=None,
        task=None,
        lexicon_version=lexicon_version,
        kind="gold:references",
    )
    return ROUTE_REFERENCES


def _same(spec: dict, a, b) -> bool:
    ftype = REGISTRY[spec["type"]]
    try:
        if ftype.is_absent(spec, a) or ftype.is_absent(spec, b):
            return ftype.is_absent(spec, a) and ftype.is_absent(spec, b)
        return ftype.canonical(spec, a) == ftype.canonical(spec, b)
    except (TypeError, ValueError, KeyError):
        return False


def _gold_write(
    *, item: Item, values: dict, provenance: dict, note: str, decided_by, task, lexicon_version, kind: str
) -> GoldRecord:
    last = GoldRecord.objects.select_for_update().filter(item=item).order_by("-revision").first()
    if last is not None:
        GoldRecord.objects.filter(item=item, is_current=True).update(is_current=False)
    record = GoldRecord.objects.create(
        item=item,
        revision=(last.revision + 1) if last else 1,
        values=values,
        provenance=provenance,
        note=note,
        schema_version=item.project.schema_version,
        lexicon_version=lexicon_version,
        decided_by=decided_by,
        task=task,
    )
    Item.objects.filter(pk=item.pk).update(stage=Stage.GOLD)
    item.stage = Stage.GOLD
    history_record(
        project=item.project,
        item=item,
        kind=kind,
        actor=decided_by,
        old=last.values if last else None,
        new=values,
        note=note,
    )
    return record


# ---------------------------------------------------------------- reviewer work


def _annotated_by(user) -> Q:
    return Q(item__in=Annotation.objects.filter(annotator=user, kind="annotation").values("item"))


def adjudication_next(*, project: Project, reviewer) -> AdjudicationTask | None:
    """Claim the reviewer's next task: their own claimed one first, then the oldest open one.

    Never an item the reviewer annotated. Claiming is a conditional UPDATE whose row count is
    checked, so two reviewers pressing "next" at once never get the same task.
    """
    mine = (
        AdjudicationTask.objects.filter(
            item__project=project, status=AdjudicationTask.Status.CLAIMED, reviewer=reviewer
        )
        .exclude(_annotated_by(reviewer))
        .first()
    )
    if mine:
        return mine
    candidates = (
        AdjudicationTask.objects.filter(item__project=project, status=AdjudicationTask.Status.OPEN)
        .exclude(_annotated_by(reviewer))
        .order_by("id")
        .values_list("pk", flat=True)[:20]
    )
    for pk in candidates:
        claimed = AdjudicationTask.objects.filter(pk=pk, status=AdjudicationTask.Status.OPEN).update(
            status=AdjudicationTask.Status.CLAIMED, reviewer=reviewer, claimed_at=timezone.now()
        )
        if claimed:
            return AdjudicationTask.objects.get(pk=pk)
    return None


def adjudication_claim(*, task: AdjudicationTask, reviewer) -> bool:
    """Claim an open task for ``reviewer`` (conditional UPDATE); True if they hold it now."""
    if task.status == AdjudicationTask.Status.CLAIMED and task.reviewer_id == reviewer.pk:
        return True
    claimed = AdjudicationTask.objects.filter(pk=task.pk, status=AdjudicationTask.Status.OPEN).update(
        status=AdjudicationTask.Status.CLAIMED, reviewer=reviewer, claimed_at=timezone.now()
    )
    if claimed:
        task.refresh_from_db()
    return bool(claimed)


def adjudication_draft_save(*, task: AdjudicationTask, reviewer, draft: dict, version: int) -> int:
    updated = (
        AdjudicationTask.objects.filter(pk=task.pk, version=version, reviewer=reviewer)
        .exclude(status=AdjudicationTask.Status.DONE)
        .update(draft=draft, version=version + 1)
    )
    if not updated:
        raise StaleVersion(
            "This adjudication was changed elsewhere (another tab or person). Reload to see it; your edits are kept in this page."
        )
    return version + 1


def gold_decide(*, task: AdjudicationTask, reviewer, decisions: dict, note: str, version: int) -> GoldRecord:
    """The reviewer's per-field decisions become the gold record.

    ``decisions``: ``{field: {"pick": k}}`` (take Annotator k's value, 1-based) or
    ``{field: {"value": v}}`` (edited). Agreed fields without a decision keep the identical value.
    Raises Invalid (per field) when the result breaks the schema, StaleVersion on 409.
    """
    item = task.item
    project = item.project
    schema = project.get_schema()
    by_id = Annotation.objects.in_bulk(task.annotation_ids)
    annotations = [by_id[i] for i in task.annotation_ids if i in by_id]
    values, provenance, errors = {}, {}, {}
    for spec in schema.fields:
        name = spec["name"]
        decision = decisions.get(name)
        if decision is None and name in (task.settled or {}):
            decision = {"pick": task.settled[name]["pick"]}
        if decision is None:
            if task.comparison.get(name) == AGREE:
                values[name] = annotations[0].values.get(name) if annotations else None
                provenance[name] = {"source": "identical"}
            else:
                errors[name] = "needs a decision: pick an annotator's value or edit it"
            continue
        if "pick" in decision:
            k = decision["pick"]
            if not isinstance(k, int) or not 1 <= k <= len(annotations):
                errors[name] = f"there is no Annotator {k}"
                continue
            values[name] = annotations[k - 1].values.get(name)
            majority = (task.settled or {}).get(name)
            if majority and majority["pick"] == k:  # the reviewer kept the majority's value
                provenance[name] = {"source": "majority", "votes": majority["votes"], "of": majority["of"]}
            else:
                provenance[name] = {"source": "reviewer", "from_annotator": k, "decided_by": reviewer.pk}
        elif "value" in decision:
            values[name] = decision["value"]
            provenance[name] = {"source": "reviewer", "edited": True, "decided_by": reviewer.pk}
        else:
            errors[name] = "unknown decision"
    check = schema.validate(values, item_text=item.text)
    errors.update({k: v for k, v in check.errors.items() if k not in errors})
    if errors:
        raise Invalid("Some fields need attention.", errors=errors)
    if len(note) > 5000:
        raise Invalid("The note is too long.", errors={"note": "at most 5000 characters"})
    lexicon_version, _ = lexicon_current(project=project)
    with transaction.atomic():
        updated = AdjudicationTask.objects.filter(
            pk=task.pk, version=version, reviewer=reviewer, status=AdjudicationTask.Status.CLAIMED
        ).update(status=AdjudicationTask.Status.DONE, version=version + 1, resolved_at=timezone.now(), draft={})
        if not updated:
            raise StaleVersion(
                "This adjudication was already saved or changed elsewhere. Reload to see the current state."
            )
        record = _gold_write(
            item=item,
            values=check.values,
            provenance=provenance,
            note=note,
            decided_by=reviewer,
            task=task,
            lexicon_version=lexicon_version,
            kind="gold:reviewer",
        )
    return record


def gold_revise(*, record: GoldRecord, reviewer) -> AdjudicationTask:
    """The reviewer reopens their own current decision, until it is in a published release (then
    only a lead's send-back reopens it). The new task is theirs at once, its draft holds their
    previous picks and edits; the current gold stays until they decide again.

    Locks: none beyond the partial unique constraint "one active adjudication per item", which
    makes a concurrent send-back or second revision fail here (Conflict) instead of doubling up.
    """
    item = record.item
    if not record.is_current or record.decided_by_id != reviewer.pk or record.task_id is None:
        raise Conflict("Only your own current decision can be revised.")
    until = released_until(item.project)
    if until is not None and record.created_at <= until:
        raise Conflict("This decision is in a published release: ask a project lead to send the item back.")
    if not Item.objects.filter(pk=item.pk, stage=Stage.GOLD).exists():
        raise Conflict("This item is not gold any more: it is already waiting for adjudication.")
    decisions = {}
    for name, prov in (record.provenance or {}).items():
        if prov.get("source") != "reviewer":
            continue
        if prov.get("from_annotator"):
            decisions[name] = {"pick": prov["from_annotator"]}
        else:
            decisions[name] = {"value": record.values.get(name)}
    previous = record.task
    try:
        with transaction.atomic():
            task = AdjudicationTask.objects.create(
                item=item,
                comparison=previous.comparison,
                annotation_ids=previous.annotation_ids,
                settled=previous.settled,
                reason="revision",
                status=AdjudicationTask.Status.CLAIMED,
                reviewer=reviewer,
                claimed_at=timezone.now(),
                draft={"decisions": decisions, "note": record.note},
            )
            Item.objects.filter(pk=item.pk).update(stage=Stage.ADJUDICATION)
            history_record(
                project=item.project,
                item=item,
                kind="revision_opened",
                actor=reviewer,
                old={"gold_revision": record.revision},
                note="reviewer revises their decision",
            )
    except IntegrityError:
        raise Conflict("This item is already waiting for adjudication.") from None
    item.stage = Stage.ADJUDICATION
    return task


def gold_send_back(*, item: Item, lead, note: str = "") -> AdjudicationTask:
    """A lead reopens a gold item for adjudication; the current gold stays until a new decision."""
    if not Item.objects.filter(pk=item.pk, stage=Stage.GOLD).exists():
        raise Conflict("Only gold items can be sent back to adjudication.")
    project = item.project
    annotations = submitted_annotations_for_item(item=item)[: project.annotators_per_item]
    _, lexicon = lexicon_current(project=project)
    comparison = compare_annotations(project=project, values=[a.values for a in annotations], lexicon=lexicon)
    try:
        with transaction.atomic():
            task = AdjudicationTask.objects.create(
                item=item, comparison=comparison, annotation_ids=[a.pk for a in annotations], reason="sent_back"
            )
            Item.objects.filter(pk=item.pk).update(stage=Stage.ADJUDICATION)
            history_record(project=project, item=item, kind="sent_back", actor=lead, note=note)
    except IntegrityError:
        raise Conflict("This item is already waiting for adjudication.") from None
    item.stage = Stage.ADJUDICATION
    return task


def gold_correct(*, item: Item, values: dict, provenance: dict, actor, note: str, kind: str) -> GoldRecord:
    """A new revision of the item's current gold with ``values`` (e.g. a reference revised by a
    lead after the independence study); the old revision is kept and the change recorded in the
    item's history under ``kind``. Locks the item's gold rows (select_for_update) as every gold
    write does."""
    lexicon_version, _ = lexicon_current(project=item.project)
    with transaction.atomic():
        return _gold_write(
            item=item,
            values=values,
            provenance=provenance,
            note=note,
            decided_by=actor,
            task=None,
            lexicon_version=lexicon_version,
            kind=kind,
        )


def adjudications_release_for(*, project: Project, user) -> int:
    """A deactivated reviewer's claimed tasks reopen for the other reviewers; their draft is kept.
    Connected to projects.hooks.member_deactivated."""
    return AdjudicationTask.objects.filter(
        item__project=project, reviewer=user, status=AdjudicationTask.Status.CLAIMED
    ).update(status=AdjudicationTask.Status.OPEN, reviewer=None, claimed_at=None)
