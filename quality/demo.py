"""Simulated annotation, adjudication and blind audit of the demo project, so the quality pages
have something to show (``manage.py quality_demo`` after ``load_demo``; also used by tests).

Everything goes through the services, as people would do it: annotators claim items and
submit records built from the anonymized candidates they are shown (by letter, as the browser
sends them), a reviewer adjudicates, auditors submit blind annotations. Only the clock is
simulated (submissions are spread over past weeks), by running the services under a patched
``django.utils.timezone.now``.

Simulated annotators believe ``projects.demo.demo_truth`` plus the faithful model's box, take a
candidate's value when it matches their belief (more or less often: that is their anchoring),
sometimes adopt a whole candidate without checking, and make small slips (another wording of
the entity, a shorter mention, a shifted box, now and then another category).
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from datetime import timedelta
from unittest import mock

from django.utils import timezone

from adjudication.models import GoldRecord
from adjudication.services import adjudication_next, gold_decide
from annotation.models import Annotation, Kind
from annotation.services import assignment_claim_next, content_warning_accept
from candidates.demo import _box
from candidates.selectors import candidates_for_annotator
from projects.demo import demo_truth
from projects.fieldtypes import AGREE
from projects.models import Item, Project, Stage
from quality.audits import audit_population
from quality.services import audit_create
from workflow.services import annotation_submit

CATEGORIES = ["group background", "religion and caste", "gender", "health condition"]


@contextmanager
def clock(at):
    """Run the services as if it were ``at`` (demo data spread over time)."""
    with mock.patch("django.utils.timezone.now", return_value=at):
        yield


def true_box(item: Item) -> list[int]:
    return _box((item.source_id or item.import_key) + "model-1")


def belief(item: Item) -> dict:
    truth = dict(demo_truth(item.text))
    if truth["label"] == "harmful":
        truth["visual_region"] = [true_box(item)]
    return truth


def _slip(rng: random.Random, values: dict, item: Item, care: float) -> dict:
    """Small human differences, more frequent for a less careful annotator."""
    v = dict(values)
    if v.get("label") != "harmful":
        if rng.random() < 0.03 * (2 - care):
            return {
                "label": "harmful",
                "target_category": rng.choice(CATEGORIES),
                "target_entity": "people",
                "text_mention": None,
                "visual_region": [],
            }
        return v
    if rng.random() < 0.04 * (2 - care):
        return {
            "label": "non-harmful",
            "target_category": None,
            "target_entity": None,
            "text_mention": None,
            "visual_region": [],
        }
    if rng.random() < 0.06 * (2 - care):
        v["target_category"] = rng.choice([c for c in CATEGORIES if c != v["target_category"]])
    if v.get("target_entity") and rng.random() < 0.25 * (2 - care):
        words = v["target_entity"].split()
        v["target_entity"] = rng.choice([" ".join(words[-2:]), v["target_entity"] + " in general", words[-1]])
    if v.get("text_mention") and rng.random() < 0.2 * (2 - care):
        words = v["text_mention"].split()
        if len(words) > 1:
            v["text_mention"] = " ".join(words[1:]) if rng.random() < 0.5 else " ".join(words[:-1])
        elif rng.random() < 0.5:
            v["text_mention"] = None
    if v.get("visual_region"):
        if rng.random() < 0.1 * (2 - care):
            v["visual_region"] = []
        else:
            x1, y1, x2, y2 = v["visual_region"][0]
            s = int(35 * (2 - care) * rng.random())
            box = [
                max(0, x1 + rng.randint(-s, s)),
                max(0, y1 + rng.randint(-s, s)),
                min(1000, x2 + rng.randint(-s, s)),
                min(1000, y2 + rng.randint(-s, s)),
            ]
            if box[0] < box[2] and box[1] < box[3]:
                v["visual_region"] = [box]
    elif v.get("label") == "harmful" and rng.random() < 0.08:
        v["visual_region"] = [true_box(item)]
    return v


def _record(rng: random.Random, item: Item, user, *, anchoring: float, care: float) -> tuple[dict, dict]:
    """(values, provenance by letter) of one simulated annotator for one item."""
    cands = candidates_for_annotator(item=item, user=user)
    if cands and rng.random() < 0.06 * anchoring:
        # Takes a whole candidate without checking: the anchoring the analytics should reveal.
        cand = cands[0]
        values = {**_absent(), **cand.fields}
        return values, {f: {"letter": cand.letter} for f in cand.fields}
    wanted = _slip(rng, belief(item), item, care)
    values, provenance = {}, {}
    for field, value in wanted.items():
        # Among the candidates that agree with them, the most complete one catches the eye first.
        match = sorted(
            (c for c in cands if field in c.fields and _same(field, c.fields[field], value)),
            key=lambda c: -sum(1 for x in c.fields.values() if x),
        )
        if match and rng.random() < anchoring:
            values[field] = match[0].fields[field]
            provenance[field] = {"letter": match[0].letter}
        elif (
            near := [c for c in cands if field in c.fields and c.fields[field] and value]
        ) and rng.random() < anchoring / 2:
            # Took a candidate's value, then edited it to what they believe (edited = True server-side).
            values[field] = value
            provenance[field] = {"letter": near[0].letter}
        else:
            values[field] = value
    return values, provenance


def _absent() -> dict:
    return {
        "label": "non-harmful",
        "target_category": None,
        "target_entity": None,
        "text_mention": None,
        "visual_region": [],
    }


def _same(field: str, a, b) -> bool:
    if field == "visual_region":
        return sorted(map(tuple, a or [])) == sorted(map(tuple, b or []))
    return a == b


def demo_simulate(
    *, project: Project, annotators: list, reviewer, weeks: int = 4, seed: int = 0, limit: int | None = None
) -> dict:
    """Annotate every item in stage "annotating" (N annotators each, rotating), then adjudicate.

    Idempotent enough for a demo: items already annotated are not in stage "annotating" any more.
    Returns counts.
    """
    rng = random.Random(seed)
    traits = {u.pk: (0.35 + 0.5 * rng.random(), 0.6 + 0.4 * rng.random()) for u in annotators}  # anchoring, care
    items = list(Item.objects.filter(project=project, stage=Stage.ANNOTATING).order_by("id")[:limit])
    start = timezone.now() - timedelta(weeks=weeks)
    span = timedelta(weeks=weeks) - timedelta(hours=1)
    for user in annotators:
        content_warning_accept(user=user, project=project)
    n_per = project.annotators_per_item
    schema = project.get_schema()
    submitted = 0
    for i, item in enumerate(items):
        at = start + span * (i / max(1, len(items) - 1))
        chosen = [annotators[(i + k) % len(annotators)] for k in range(min(n_per, len(annotators)))]
        for k, user in enumerate(chosen):
            with clock(at + timedelta(minutes=5 * k)):
                claimed = assignment_claim_next(annotator=user, project=project)
                if claimed.annotation is None or claimed.annotation.item_id != item.pk:
                    continue
                anchoring, care = traits[user.pk]
                values, provenance = _record(rng, claimed.annotation.item, user, anchoring=anchoring, care=care)
                if not schema.validate(values, item_text=item.text).ok:  # a candidate missing a required field
                    values, provenance = belief(item), {}
            seconds = rng.randint(20, 140)
            with clock(at + timedelta(minutes=5 * k, seconds=seconds)):
                annotation_submit(
                    annotator=user,
                    item=claimed.annotation.item,
                    values=values,
                    version=claimed.annotation.version,
                    provenance=provenance,
                    time_spent_ms=seconds * 1000,
                )
                submitted += 1
    decided = adjudicate_closest(project=project, reviewer=reviewer)
    return {"items": len(items), "submitted": submitted, "adjudicated": decided}


def adjudicate_closest(*, project: Project, reviewer) -> int:
    """The reviewer picks, per disputed field, the annotation closest to what they believe."""
    done = 0
    while (task := adjudication_next(project=project, reviewer=reviewer)) is not None:
        truth = belief(task.item)
        anns = Annotation.objects.in_bulk(task.annotation_ids)
        ordered = [anns[i] for i in task.annotation_ids]
        decisions = {}
        for field, outcome in task.comparison.items():
            if outcome == AGREE:
                continue
            best = next(
                (k for k, a in enumerate(ordered, 1) if _same(field, a.values.get(field), truth.get(field))), None
            )
            decisions[field] = {"pick": best} if best else {"value": truth.get(field)}
        try:
            gold_decide(task=task, reviewer=reviewer, decisions=decisions, note="demo", version=task.version)
        except Exception:
            gold_decide(
                task=task,
                reviewer=reviewer,
                decisions={f: {"value": truth.get(f)} for f in task.comparison},
                note="demo",
                version=task.version,
            )
        done += 1
    return done


def demo_audit(*, project: Project, lead, size: int = 200, seed: int = 7) -> dict:
    """Create a blind audit and let the auditors submit their annotations (no candidates)."""
    rng = random.Random(seed)
    population = len(audit_population(project=project))
    audit = audit_create(project=project, created_by=lead, size=min(size, population), seed=seed)
    n = 0
    for ai in audit.audit_items.select_related("item", "auditor", "annotation").filter(auditor__isnull=False):
        content_warning_accept(user=ai.auditor, project=project)
        gold = GoldRecord.objects.get(item=ai.item, is_current=True).values
        values = _slip(rng, belief(ai.item) if rng.random() < 0.5 else gold, ai.item, care=0.8)
        annotation_submit(
            annotator=ai.auditor,
            item=ai.item,
            values=values,
            version=ai.annotation.version,
            kind=Kind.AUDIT,
            time_spent_ms=rng.randint(30_000, 90_000),
        )
        n += 1
    return {"audit": audit.pk, "size": audit.size, "submitted": n}
