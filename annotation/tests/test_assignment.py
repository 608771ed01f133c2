"""Who gets which item: N distinct annotators, balance, expiry, skips, the session cap."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.signals import user_logged_in
from django.test import RequestFactory
from django.utils import timezone

from annotation.factories import MEME3W_HARMFUL, claim, items_open, ready
from annotation.models import Annotation, Assignment
from annotation.selectors import annotator_progress
from annotation.services import ItemClosed, SlotTaken, annotation_save_draft, annotation_skip, assignment_claim_next
from core.errors import Invalid as InvalidValues
from projects.models import Stage
from projects.services import item_stage_set
from workflow.services import annotation_submit

pytestmark = pytest.mark.django_db


def expire(annotation):
    Assignment.objects.filter(annotation=annotation).update(expires_at=timezone.now() - timedelta(seconds=1))


def submit(user, item, values=MEME3W_HARMFUL):
    a = Annotation.objects.get(item=item, annotator=user, kind="annotation")
    return annotation_submit(annotator=user, item=item, values=values, version=a.version)


def test_only_items_in_annotating_are_handed_out(project, items, ann_a):
    assert assignment_claim_next(annotator=ann_a, project=project).outcome == "empty"
    item_stage_set(item=items[2], stage=Stage.ANNOTATING)
    item_stage_set(item=items[3], stage=Stage.GOLD)
    got = claim(ann_a, project)
    assert got.item_id == items[2].pk
    assert got.status == "draft" and got.version == 0
    assignment = Assignment.objects.get(annotation=got)
    minutes = (assignment.expires_at - assignment.claimed_at).total_seconds() / 60
    assert minutes == pytest.approx(project.claim_timeout_minutes)


def test_each_item_gets_n_distinct_annotators_and_started_items_come_first(project, open_items, ann_a, ann_b, ann_c):
    first = claim(ann_a, project)
    assert first.item_id == open_items[0].pk
    # b is given the item a started (so items finish) rather than a fresh one.
    assert claim(ann_b, project).item_id == open_items[0].pk
    # N = 2: the item is full, c gets another one.
    assert claim(ann_c, project).item_id == open_items[1].pk
    assert Assignment.objects.filter(item=open_items[0]).count() == 2


def test_items_with_most_slots_held_are_preferred(lead, tmp_path, make_user):
    from projects.factories import items_create, project_with_members

    users = [make_user(f"u{i}") for i in range(4)]
    project = project_with_members("aha1", preset="aha", lead=[lead], annotator=users)
    assert project.annotators_per_item == 3
    items = items_create(project, tmp_path / "aha", 3)
    items_open(items)
    a, b, c, d = (ready(u, project) for u in users)
    i1 = claim(a, project).item_id
    submit(a, items[0], {"is_hateful": "Not-Hateful", "non_hateful_type": ["Humor"]})
    assert claim(a, project).item_id == items[1].pk  # a cannot get i1 again
    # i1 and i2 each hold one slot: the tie goes to the older item.
    assert claim(b, project).item_id == i1
    submit(b, items[0], {"is_hateful": "Not-Hateful", "non_hateful_type": ["Humor"]})
    # i1 now holds two slots, i2 one: c completes i1.
    assert claim(c, project).item_id == i1
    assert claim(d, project).item_id == items[1].pk


def test_next_resumes_the_annotators_unfinished_item(project, open_items, ann_a):
    first = claim(ann_a, project)
    again = assignment_claim_next(annotator=ann_a, project=project)
    assert again.outcome == "resumed" and again.annotation.pk == first.pk
    assert Annotation.objects.filter(annotator=ann_a).count() == 1


def test_expired_claim_returns_item_to_pool_and_keeps_the_draft(project, open_items, ann_a, ann_b, ann_c):
    mine = claim(ann_a, project)
    item = mine.item
    annotation_save_draft(
        annotator=ann_a, item=item, values={"label": "harmful", "target_entity": "Zorgians"}, version=0
    )
    expire(mine)
    # The slot is free again: b and c take both slots of the item a left.
    assert claim(ann_b, project).item_id == item.pk
    assert claim(ann_c, project).item_id == item.pk
    draft = Annotation.objects.get(pk=mine.pk)
    assert draft.values["target_entity"] == "Zorgians" and draft.status == "draft"
    # a's next item is another one; the draft stays, still saveable but not submittable.
    assert claim(ann_a, project).item_id != item.pk
    saved = annotation_save_draft(annotator=ann_a, item=item, values={**MEME3W_HARMFUL}, version=1)
    assert saved.holds_slot is False and saved.annotation.version == 2
    with pytest.raises(SlotTaken):
        annotation_submit(annotator=ann_a, item=item, values=MEME3W_HARMFUL, version=2)
    assert Annotation.objects.get(pk=mine.pk).status == "draft"
    # c skips: a slot frees up and a can submit the kept draft.
    annotation_skip(annotator=ann_c, item=item, reason="disturbing")
    result = annotation_submit(annotator=ann_a, item=item, values=MEME3W_HARMFUL, version=2)
    assert result.annotation.status == "submitted"


def test_annotator_coming_back_to_an_expired_free_slot_continues(project, open_items, ann_a):
    mine = claim(ann_a, project)
    annotation_save_draft(annotator=ann_a, item=mine.item, values={"label": "harmful"}, version=0)
    expire(mine)
    back = assignment_claim_next(annotator=ann_a, project=project)
    assert back.outcome == "resumed" and back.annotation.pk == mine.pk
    assert back.annotation.values["label"] == "harmful"
    assert Assignment.objects.get(annotation=mine).expires_at > timezone.now()


def test_draft_save_renews_the_claim(project, open_items, ann_a):
    mine = claim(ann_a, project)
    fresh = Assignment.objects.get(annotation=mine).expires_at
    annotation_save_draft(annotator=ann_a, item=mine.item, values={"label": "harmful"}, version=0)
    assert Assignment.objects.get(annotation=mine).expires_at == fresh  # nearly full: not rewritten
    Assignment.objects.filter(annotation=mine).update(expires_at=timezone.now() + timedelta(minutes=1))
    annotation_save_draft(annotator=ann_a, item=mine.item, values={"label": "harmful"}, version=1)
    left = Assignment.objects.get(annotation=mine).expires_at - timezone.now()
    assert left > timedelta(minutes=project.claim_timeout_minutes - 1)


def test_skip_gives_the_item_to_others_and_never_back(project, open_items, ann_a, ann_b, ann_c):
    mine = claim(ann_a, project)
    with pytest.raises(InvalidValues):
        annotation_skip(annotator=ann_a, item=mine.item, reason="")
    with pytest.raises(InvalidValues):
        annotation_skip(annotator=ann_a, item=mine.item, reason="other", note="  ")
    annotation_skip(annotator=ann_a, item=mine.item, reason="other", note="cannot read the caption")
    skipped = Annotation.objects.get(pk=mine.pk)
    assert skipped.status == "skipped" and skipped.skip_reason == "other: cannot read the caption"
    assert not Assignment.objects.filter(annotation=mine).exists()
    assert claim(ann_b, project).item_id == mine.item_id
    assert claim(ann_c, project).item_id == mine.item_id
    seen = set()
    for _ in range(len(open_items)):
        result = assignment_claim_next(annotator=ann_a, project=project)
        if result.annotation is None:
            break
        seen.add(result.annotation.item_id)
        annotation_skip(annotator=ann_a, item=result.annotation.item, reason="disturbing")
    assert mine.item_id not in seen
    assert seen == {i.pk for i in open_items[1:]}
    with pytest.raises(ItemClosed):
        annotation_save_draft(annotator=ann_a, item=mine.item, values={}, version=skipped.version)


def test_session_cap_gives_a_break_until_next_login(project, open_items, ann_a):
    project.session_item_cap = 2
    project.save()
    first = claim(ann_a, project)
    submit(ann_a, first.item)
    second = claim(ann_a, project)
    annotation_skip(annotator=ann_a, item=second.item, reason="disturbing")  # skips count: the item was seen
    assert assignment_claim_next(annotator=ann_a, project=project).outcome == "break"
    assert annotator_progress(user=ann_a, project=project).cap_reached
    # Revising a submitted item does not count as a new one.
    done = Annotation.objects.get(pk=first.pk)
    annotation_submit(annotator=ann_a, item=first.item, values=MEME3W_HARMFUL, version=done.version)
    assert annotator_progress(user=ann_a, project=project).session_count == 2
    # A new login starts a new session.
    user_logged_in.send(sender=type(ann_a), request=RequestFactory().get("/"), user=ann_a)
    assert assignment_claim_next(annotator=ann_a, project=project).outcome == "claimed"


def test_progress_counts_done_today_and_remaining(project, open_items, ann_a, ann_b, ann_c):
    p = annotator_progress(user=ann_a, project=project)
    assert (p.done_today, p.remaining, p.session_count) == (0, 4, 0)
    item = claim(ann_a, project).item
    submit(ann_a, item)
    claim(ann_b, project)  # fills the item's second slot
    assert annotator_progress(user=ann_a, project=project).done_today == 1
    assert annotator_progress(user=ann_a, project=project).remaining == 3
    # c can't get the full item: 3 left for c as well.
    assert annotator_progress(user=ann_c, project=project).remaining == 3


def test_item_leaving_annotation_is_not_resumed(project, open_items, ann_a):
    mine = claim(ann_a, project)
    item_stage_set(item=mine.item, stage=Stage.EXCLUDED)
    nxt = assignment_claim_next(annotator=ann_a, project=project)
    assert nxt.outcome == "claimed" and nxt.annotation.item_id != mine.item_id
    with pytest.raises(ItemClosed):
        annotation_save_draft(annotator=ann_a, item=mine.item, values={}, version=0)
