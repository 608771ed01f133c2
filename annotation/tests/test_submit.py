"""Saving, validating, versioning, routing and recording an annotation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.factories import MEME3W_HARMFUL, MEME3W_NOT_HARMFUL, claim
from annotation.models import Annotation, AnnotationRevision, Assignment
from annotation.selectors import annotation_state, submitted_annotations_for_item
from annotation.services import ItemClosed, NotAssigned, annotation_audit_assign, annotation_save_draft
from candidates.factories import candidates_create
from core.errors import Invalid as InvalidValues
from core.errors import StaleVersion
from projects.models import Stage
from projects.services import item_stage_set
from workflow.services import annotation_submit

pytestmark = pytest.mark.django_db

CANDIDATE_REPLIES = [
    {
        "label": "harmful",
        "target_category": "group background",
        "target_entity": "people from Planet Zorg",
        "text_mention": "people from Planet Zorg",
        "visual_region": [[10, 20, 300, 400]],
    },
    {
        "label": "harmful",
        "target_category": "religion and caste",
        "target_entity": "Zorg monks",
        "text_mention": "Planet Zorg",
        "visual_region": [],
    },
    {"label": "non-harmful", "target_category": None, "target_entity": None, "text_mention": None, "visual_region": []},
]


@pytest.fixture
def mine(project, open_items, ann_a):
    return claim(ann_a, project)


def reload(a):
    return Annotation.objects.get(pk=a.pk)


def test_submit_stores_validated_values_and_history(mine, ann_a):
    annotation_save_draft(annotator=ann_a, item=mine.item, values={"label": "harmful"}, version=0, time_spent_ms=1500)
    result = annotation_submit(annotator=ann_a, item=mine.item, values=MEME3W_HARMFUL, version=1, time_spent_ms=2500)
    a = reload(mine)
    assert a.status == "submitted" and a.version == 2 and a.values == MEME3W_HARMFUL
    assert a.submitted_at and a.first_submitted_at == a.submitted_at
    assert a.time_spent_ms == 4000
    assert a.schema_version == mine.item.project.schema_version
    assert Assignment.objects.get(annotation=a).status == "submitted"
    assert list(AnnotationRevision.objects.filter(annotation=a).values_list("version", "status")) == [
        (1, "draft"),
        (2, "submitted"),
    ]
    assert result.routed_to is None  # one of two annotators


def test_non_harmful_clears_the_target_fields(mine, ann_a):
    leftover = {**MEME3W_HARMFUL, "label": "non-harmful"}
    annotation_submit(annotator=ann_a, item=mine.item, values=leftover, version=0)
    assert reload(mine).values == MEME3W_NOT_HARMFUL


@pytest.mark.parametrize(
    "values, field, message",
    [
        ({"label": "harmful"}, "target_category", "is required"),
        ({**MEME3W_HARMFUL, "text_mention": "people from planet zorg"}, "text_mention", "copied exactly"),
        ({**MEME3W_HARMFUL, "visual_region": [[0, 0, 1001, 10]]}, "visual_region", "[0, 1000]"),
        ({**MEME3W_HARMFUL, "visual_region": [[50, 50, 10, 10]]}, "visual_region", "x1 < x2"),
        ({**MEME3W_HARMFUL, "visual_region": [[1.5, 2, 30, 40]]}, "visual_region", "integers"),
        ({**MEME3W_HARMFUL, "target_category": "aliens"}, "target_category", "must be one of"),
        ({**MEME3W_HARMFUL, "bogus": 1}, "__all__", "unknown field"),
    ],
)
def test_invalid_submit_names_the_field_and_saves_nothing(mine, ann_a, values, field, message):
    with pytest.raises(InvalidValues) as exc:
        annotation_submit(annotator=ann_a, item=mine.item, values=values, version=0)
    assert message in exc.value.errors[field]
    a = reload(mine)
    assert a.version == 0 and a.status == "draft" and not a.revisions.exists()


def test_mention_must_be_an_exact_substring(mine, ann_a):
    text = mine.item.text
    exact = text[text.index("people") : text.index("people") + 10]
    annotation_submit(annotator=ann_a, item=mine.item, values={**MEME3W_HARMFUL, "text_mention": exact}, version=0)
    assert reload(mine).values["text_mention"] == exact


@pytest.mark.parametrize(
    "values",
    [
        "harmful",
        ["label"],
        {"label": 3},
        {"visual_region": [[1, 2, 3]]},
        {"visual_region": "[[1,2,3,4]]"},
        {"target_entity": "x" * 30_000},
        {"zzz": 1},
    ],
)
def test_malformed_draft_is_refused_and_nothing_is_lost(mine, ann_a, values):
    annotation_save_draft(annotator=ann_a, item=mine.item, values={"label": "harmful"}, version=0)
    with pytest.raises(InvalidValues):
        annotation_save_draft(annotator=ann_a, item=mine.item, values=values, version=1)
    a = reload(mine)
    assert a.version == 1 and a.values["label"] == "harmful"


def test_draft_keeps_incomplete_values_and_clears_hidden_ones(mine, ann_a):
    annotation_save_draft(
        annotator=ann_a, item=mine.item, version=0, values={"label": "non-harmful", "target_entity": "stale leftover"}
    )
    assert reload(mine).values["target_entity"] is None
    annotation_save_draft(
        annotator=ann_a, item=mine.item, version=1, values={"label": "harmful", "target_entity": "Zorg"}
    )
    assert reload(mine).values["target_entity"] == "Zorg"


def test_stale_version_is_refused_never_overwritten(mine, ann_a):
    annotation_save_draft(annotator=ann_a, item=mine.item, values={"label": "harmful"}, version=0)
    with pytest.raises(StaleVersion) as exc:
        annotation_save_draft(annotator=ann_a, item=mine.item, values={"label": "non-harmful"}, version=0)
    assert exc.value.status == 409 and "another tab" in exc.value.message
    with pytest.raises(StaleVersion):
        annotation_submit(annotator=ann_a, item=mine.item, values=MEME3W_NOT_HARMFUL, version=0)
    assert reload(mine).values["label"] == "harmful"
    with pytest.raises(InvalidValues):
        annotation_save_draft(annotator=ann_a, item=mine.item, values={}, version="1")


def test_unassigned_item_cannot_be_written(project, open_items, ann_a):
    with pytest.raises(NotAssigned):
        annotation_save_draft(annotator=ann_a, item=open_items[0], values={}, version=0)


def test_revision_until_the_item_leaves_annotation(project, mine, ann_a, ann_b):
    annotation_submit(annotator=ann_a, item=mine.item, values=MEME3W_HARMFUL, version=0)
    first_time = reload(mine).first_submitted_at
    # Autosaving a revision keeps the submitted record intact until it is submitted again.
    edit = {**MEME3W_HARMFUL, "target_entity": "Zorgians"}
    annotation_save_draft(annotator=ann_a, item=mine.item, values=edit, version=1)
    a = reload(mine)
    assert a.status == "submitted" and a.values == MEME3W_HARMFUL and a.draft_values["target_entity"] == "Zorgians"
    assert annotation_state(a)["values"]["target_entity"] == "Zorgians"
    annotation_submit(annotator=ann_a, item=mine.item, values=edit, version=2)
    a = reload(mine)
    assert a.values["target_entity"] == "Zorgians" and a.draft_values is None
    assert a.first_submitted_at == first_time and a.submitted_at >= first_time
    # b's submission is the N-th: the item is routed and a's annotation is closed.
    theirs = claim(ann_b, project)
    assert theirs.item_id == mine.item_id
    result = annotation_submit(annotator=ann_b, item=theirs.item, values=MEME3W_HARMFUL, version=0)
    assert result.routed_to == "adjudication"  # entity differs beyond the threshold
    mine.item.refresh_from_db()
    assert mine.item.stage == Stage.ADJUDICATION
    assert not Assignment.objects.filter(item=mine.item).exists()
    with pytest.raises(ItemClosed):
        annotation_submit(annotator=ann_a, item=mine.item, values=MEME3W_HARMFUL, version=3)
    with pytest.raises(ItemClosed):
        annotation_save_draft(annotator=ann_a, item=mine.item, values=MEME3W_HARMFUL, version=3)


def test_identical_annotations_become_gold(project, mine, ann_a, ann_b):
    annotation_submit(annotator=ann_a, item=mine.item, values=MEME3W_HARMFUL, version=0)
    theirs = claim(ann_b, project)
    result = annotation_submit(annotator=ann_b, item=theirs.item, values=MEME3W_HARMFUL, version=0)
    assert result.routed_to == "gold"
    mine.item.refresh_from_db()
    assert mine.item.stage == Stage.GOLD
    assert [a.annotator for a in submitted_annotations_for_item(item=mine.item)] == [ann_a, ann_b]


def test_provenance_resolves_ids_server_side_and_computes_edits(project, open_items, ann_a):
    from candidates.selectors import candidate_id_for_letter, candidates_for_annotator

    candidates_create(open_items[0], CANDIDATE_REPLIES)
    mine = claim(ann_a, project)
    shown = {c.letter: c.fields for c in candidates_for_annotator(item=mine.item, user=ann_a)}
    harmful = next(letter for letter, f in shown.items() if f.get("target_entity") == "people from Planet Zorg")
    other = next(letter for letter, f in shown.items() if f.get("target_entity") == "Zorg monks")
    values = {**shown[harmful], "target_entity": "Zorgians", "text_mention": shown[other]["text_mention"]}
    provenance = {
        "label": {"letter": harmful},
        "target_category": {"letter": harmful},
        "target_entity": {"letter": harmful},
        "text_mention": {"letter": other, "candidate_id": 999999, "edited": False},  # browser ids are ignored
        "visual_region": {"letter": harmful},
    }
    annotation_submit(annotator=ann_a, item=mine.item, values=values, version=0, provenance=provenance)
    stored = reload(mine).provenance
    harmful_id = candidate_id_for_letter(item=mine.item, user=ann_a, letter=harmful)
    other_id = candidate_id_for_letter(item=mine.item, user=ann_a, letter=other)
    assert stored["label"] == {"letter": harmful, "candidate_id": harmful_id, "edited": False}
    assert stored["target_entity"] == {"letter": harmful, "candidate_id": harmful_id, "edited": True}
    assert stored["text_mention"] == {"letter": other, "candidate_id": other_id, "edited": False}
    assert stored["visual_region"]["edited"] is False
    # What goes back to the browser has letters, never candidate ids.
    assert "candidate_id" not in str(annotation_state(reload(mine)))


def test_unknown_candidate_letter_is_refused(project, open_items, ann_a):
    candidates_create(open_items[0], CANDIDATE_REPLIES[:1])
    mine = claim(ann_a, project)
    with pytest.raises(InvalidValues) as exc:
        annotation_save_draft(
            annotator=ann_a,
            item=mine.item,
            values={"label": "harmful"},
            version=0,
            provenance={"label": {"letter": "Q"}},
        )
    assert "no candidate Q" in exc.value.errors["label"]


def test_active_time_is_clamped_to_wall_time(mine, ann_a):
    annotation_save_draft(annotator=ann_a, item=mine.item, values={}, version=0, time_spent_ms=10 * 3600 * 1000)
    assert reload(mine).time_spent_ms <= 60_000  # the claim was made a moment ago
    Annotation.objects.filter(pk=mine.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    annotation_save_draft(annotator=ann_a, item=mine.item, values={}, version=1, time_spent_ms=120_000)
    assert 120_000 <= reload(mine).time_spent_ms <= 180_000
    with pytest.raises(InvalidValues):
        annotation_save_draft(annotator=ann_a, item=mine.item, values={}, version=2, time_spent_ms="lots")


def test_audit_is_blind_separate_and_never_routes(project, open_items, ann_a, ann_b, auditor, annotator_a):
    candidates_create(open_items[0], CANDIDATE_REPLIES[:1])
    with pytest.raises(InvalidValues):
        annotation_audit_assign(auditor=annotator_a, item=open_items[0])  # not an auditor
    audit = annotation_audit_assign(auditor=auditor, item=open_items[0])
    assert annotation_audit_assign(auditor=auditor, item=open_items[0]).pk == audit.pk  # idempotent
    assert audit.kind == "audit" and Assignment.objects.get(annotation=audit).expires_at is None
    with pytest.raises(InvalidValues):
        annotation_submit(
            annotator=auditor,
            item=open_items[0],
            values=MEME3W_HARMFUL,
            version=0,
            provenance={"label": {"letter": "A"}},
            kind="audit",
        )
    item_stage_set(item=open_items[0], stage=Stage.GOLD)  # audits are of gold items
    annotation_submit(annotator=auditor, item=open_items[0], values=MEME3W_HARMFUL, version=0, kind="audit")
    assert reload(audit).status == "submitted"
    assert submitted_annotations_for_item(item=open_items[0]) == []
    assert [a.pk for a in submitted_annotations_for_item(item=open_items[0], kind="audit")] == [audit.pk]


def test_an_annotator_of_the_item_cannot_audit_it(project, open_items, ann_a, auditor):
    from projects.services import membership_add

    membership_add(project=project, user=ann_a, role="auditor")
    mine = claim(ann_a, project)
    annotation_submit(annotator=ann_a, item=mine.item, values=MEME3W_HARMFUL, version=0)
    with pytest.raises(InvalidValues):
        annotation_audit_assign(auditor=ann_a, item=mine.item)
