from __future__ import annotations

import pytest

from adjudication.models import AdjudicationTask, GoldRecord, HistoryEvent
from adjudication.services import (
    StaleVersion,
    adjudication_draft_save,
    adjudication_next,
    gold_decide,
    gold_send_back,
)
from annotation.factories import MEME3W_HARMFUL as HARMFUL
from annotation.factories import MEME3W_NOT_HARMFUL as NOT_HARMFUL
from core.errors import ServiceError as ValidationError
from projects.models import Item, Stage

pytestmark = pytest.mark.django_db


def test_identical_annotations_become_gold_without_review(project, one_item, annotator_a, annotator_b, submit):
    assert submit(annotator_a, project, HARMFUL).routed_to is None
    assert submit(annotator_b, project, dict(HARMFUL)).routed_to == "gold"
    gold = GoldRecord.objects.get(item=one_item)
    assert gold.values == HARMFUL and gold.revision == 1 and gold.is_current
    assert {p["source"] for p in gold.provenance.values()} == {"identical"}
    assert Item.objects.get(pk=one_item.pk).stage == Stage.GOLD
    assert not AdjudicationTask.objects.exists()


def test_disagreement_goes_to_the_queue_with_per_field_marks(project, one_item, annotator_a, annotator_b, submit):
    submit(annotator_a, project, HARMFUL)
    other = {
        **HARMFUL,
        "target_category": "gender",
        "target_entity": "Planet Zorg people",
        "visual_region": [[105, 120, 400, 500]],
    }
    assert submit(annotator_b, project, other).routed_to == "adjudication"
    task = AdjudicationTask.objects.get(item=one_item)
    assert task.comparison == {
        "label": "agree",
        "target_category": "disagree",
        "target_entity": "minor",
        "text_mention": "agree",
        "visual_region": "minor",
    }
    assert Item.objects.get(pk=one_item.pk).stage == Stage.ADJUDICATION
    assert not GoldRecord.objects.exists()


def test_minor_differences_are_merged_by_enabled_rules_with_the_rule_recorded(
    project, one_item, annotator_a, annotator_b, submit
):
    project.auto_merge_rules = ["entity_canonical", "boxes_mean"]
    project.save()
    submit(annotator_a, project, {**HARMFUL, "target_entity": "Zorgian women"})
    routed = submit(
        annotator_b, project, {**HARMFUL, "target_entity": "zorgian women!", "visual_region": [[102, 120, 400, 502]]}
    )
    assert routed.routed_to == "gold"
    gold = GoldRecord.objects.get(item=one_item)
    assert gold.values["target_entity"] == "Zorgian women"
    assert gold.values["visual_region"] == [[101, 120, 400, 501]]
    assert gold.provenance["target_entity"] == {"source": "auto-merge", "rule": "entity_canonical"}
    assert gold.provenance["visual_region"] == {"source": "auto-merge", "rule": "boxes_mean"}
    assert gold.provenance["label"] == {"source": "identical"}


def test_lexicon_variants_are_minor_not_disagreement(project, one_item, annotator_a, annotator_b, submit):
    # meme3w projects are seeded with Table 8: woman -> women
    submit(
        annotator_a, project, {**HARMFUL, "target_category": "gender", "target_entity": "women", "text_mention": None}
    )
    submit(
        annotator_b, project, {**HARMFUL, "target_category": "gender", "target_entity": "woman", "text_mention": None}
    )
    assert AdjudicationTask.objects.get(item=one_item).comparison["target_entity"] == "minor"


def test_presence_mismatch_is_a_disagreement(project, one_item, annotator_a, annotator_b, submit):
    submit(annotator_a, project, HARMFUL)
    submit(annotator_b, project, {**HARMFUL, "text_mention": None})
    assert AdjudicationTask.objects.get(item=one_item).comparison["text_mention"] == "disagree"


def test_reviewer_never_gets_an_item_they_annotated(project, one_item, annotator_a, annotator_b, submit):
    from projects.services import membership_add

    membership_add(project=project, user=annotator_a, role="reviewer")
    submit(annotator_a, project, HARMFUL)
    submit(annotator_b, project, NOT_HARMFUL)
    assert adjudication_next(project=project, reviewer=annotator_a) is None


def _disagreeing(project, annotator_a, annotator_b, submit):
    submit(annotator_a, project, HARMFUL)
    submit(annotator_b, project, {**HARMFUL, "target_category": "gender", "visual_region": [[600, 600, 900, 900]]})
    return AdjudicationTask.objects.get()


def test_reviewer_picks_per_field_and_gold_records_who_and_where_from(
    project, one_item, annotator_a, annotator_b, reviewer, submit
):
    task = _disagreeing(project, annotator_a, annotator_b, submit)
    claimed = adjudication_next(project=project, reviewer=reviewer)
    assert claimed == task
    # Another reviewer does not get the claimed task.
    from projects.factories import user_create
    from projects.services import membership_add

    r2 = user_create("reviewer2")
    membership_add(project=project, user=r2, role="reviewer")
    assert adjudication_next(project=project, reviewer=r2) is None
    gold = gold_decide(
        task=claimed,
        reviewer=reviewer,
        version=claimed.version,
        note="B's boxes are tighter",
        decisions={"target_category": {"pick": 1}, "visual_region": {"pick": 2}},
    )
    assert gold.values["target_category"] == "group background"
    assert gold.values["visual_region"] == [[600, 600, 900, 900]]
    assert gold.provenance["target_category"] == {"source": "reviewer", "from_annotator": 1, "decided_by": reviewer.pk}
    assert gold.provenance["visual_region"]["from_annotator"] == 2
    assert gold.provenance["label"] == {"source": "identical"}
    assert gold.note == "B's boxes are tighter" and gold.decided_by == reviewer
    assert Item.objects.get(pk=one_item.pk).stage == Stage.GOLD
    assert AdjudicationTask.objects.get().status == "done"
    with pytest.raises(StaleVersion):
        gold_decide(
            task=claimed,
            reviewer=reviewer,
            version=claimed.version,
            note="",
            decisions={"target_category": {"pick": 2}, "visual_region": {"pick": 2}},
        )


def test_undecided_disagreement_and_invalid_edits_are_refused_per_field(
    project, one_item, annotator_a, annotator_b, reviewer, submit
):
    task = _disagreeing(project, annotator_a, annotator_b, submit)
    adjudication_next(project=project, reviewer=reviewer)
    task.refresh_from_db()
    with pytest.raises(ValidationError) as exc:
        gold_decide(
            task=task, reviewer=reviewer, version=task.version, note="", decisions={"target_category": {"pick": 3}}
        )
    errors = exc.value.errors
    assert "no Annotator 3" in errors["target_category"] and "needs a decision" in errors["visual_region"]
    with pytest.raises(ValidationError) as exc:
        gold_decide(
            task=task,
            reviewer=reviewer,
            version=task.version,
            note="",
            decisions={"target_category": {"pick": 1}, "visual_region": {"value": [[5, 5, 2000, 9]]}},
        )
    assert "[0, 1000]" in exc.value.errors["visual_region"]
    assert not GoldRecord.objects.exists()


def test_edited_value_and_draft_versioning(project, one_item, annotator_a, annotator_b, reviewer, submit):
    task = _disagreeing(project, annotator_a, annotator_b, submit)
    task = adjudication_next(project=project, reviewer=reviewer)
    v = adjudication_draft_save(
        task=task, reviewer=reviewer, draft={"target_category": {"pick": 2}}, version=task.version
    )
    with pytest.raises(StaleVersion):
        adjudication_draft_save(task=task, reviewer=reviewer, draft={}, version=task.version)
    gold = gold_decide(
        task=task,
        reviewer=reviewer,
        version=v,
        note="",
        decisions={"target_category": {"pick": 2}, "visual_region": {"value": [[10, 10, 20, 20]]}},
    )
    assert gold.provenance["visual_region"] == {"source": "reviewer", "edited": True, "decided_by": reviewer.pk}


def test_lead_sends_gold_back_and_a_new_revision_keeps_the_old(
    project, one_item, annotator_a, annotator_b, reviewer, lead, submit
):
    submit(annotator_a, project, HARMFUL)
    submit(annotator_b, project, HARMFUL)
    task = gold_send_back(item=one_item, lead=lead, note="entity too broad")
    assert Item.objects.get(pk=one_item.pk).stage == Stage.ADJUDICATION
    with pytest.raises(ValidationError):
        gold_send_back(item=one_item, lead=lead)
    task = adjudication_next(project=project, reviewer=reviewer)
    gold_decide(
        task=task,
        reviewer=reviewer,
        version=task.version,
        note="narrower",
        decisions={"target_entity": {"value": "Zorgian engineers"}},
    )
    revisions = list(GoldRecord.objects.filter(item=one_item).order_by("revision"))
    assert [(g.revision, g.is_current) for g in revisions] == [(1, False), (2, True)]
    assert revisions[1].values["target_entity"] == "Zorgian engineers"
    kinds = list(HistoryEvent.objects.filter(item=one_item).values_list("kind", flat=True))
    assert kinds == ["gold:auto", "sent_back", "gold:reviewer"]
