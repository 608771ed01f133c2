"""Workflows of several stages as data (projects.workflow): the MemeCap protocol, service level."""

from __future__ import annotations

import pytest

from adjudication.models import GoldRecord, HistoryEvent
from annotation.factories import claim, items_open, ready
from annotation.models import Annotation
from annotation.selectors import workspace_for_annotator
from annotation.services import ItemClosed, annotation_save_draft, assignment_claim_next
from core.errors import Invalid
from projects.factories import items_create, project_with_members
from projects.fieldtypes import SchemaError
from projects.models import Item, Stage
from projects.presets import MEMECAP_SCHEMA, MEMECAP_WORKFLOW
from projects.schema import Schema
from projects.workflow import Workflow
from workflow.services import annotation_submit, item_flag

pytestmark = pytest.mark.django_db

LITERAL = {"image_caption": "Tom cat is shaking hands with two small cats and smiling"}


def meme(i: int) -> dict:
    return {"metaphors": [{"vehicle": "Tom cat", "meaning": f"the poster {i}"}], "meme_caption": f"caption {i}"}


@pytest.fixture
def people(make_user):
    return {name: make_user(name) for name in ("lit1", "lit2", "cap1", "cap2", "cap3")}


@pytest.fixture
def memecap(lead, people, tmp_path):
    project = project_with_members("mc", preset="memecap", lead=[lead], annotator=list(people.values()))
    for u in people.values():
        ready(u, project)
    items = items_create(project, tmp_path / "src", 6)
    items_open(items)
    return project, items


def _split_items(project, items):
    wf = project.get_workflow()
    return {name: [it for it in items if wf.split_for(it) == name] for name in ("train", "val", "test")}


def test_memecap_round_one_then_round_two_by_other_people_then_references(memecap, people):
    project, items = memecap
    item = items[0]
    # Round 1: one literal caption per item; the page shows neither the meme's text nor its title.
    mine = claim(people["lit1"], project)
    assert mine.item_id == item.pk and mine.stage == 0
    ws = workspace_for_annotator(annotation=mine, audit=False)
    assert [f.name for f in ws.fields] == ["image_caption"] and not ws.show_text and not ws.show_title
    assert ws.image_variant == "textfree" and not ws.candidates
    with pytest.raises(Invalid):  # a round-2 field is not part of round 1
        annotation_save_draft(annotator=people["lit1"], item=mine.item, values=meme(0), version=mine.version)
    annotation_submit(annotator=people["lit1"], item=mine.item, values=LITERAL, version=mine.version)
    item.refresh_from_db()
    assert (item.stage, item.workflow_stage) == (Stage.ANNOTATING, 1)
    assert HistoryEvent.objects.filter(item=item, kind="stage").exists()

    # Round 2 excludes round-1 workers: lit1 is never handed this item again.
    while (nxt := assignment_claim_next(annotator=people["lit1"], project=project)).annotation is not None:
        assert nxt.annotation.item_id != item.pk
        annotation_submit(annotator=people["lit1"], item=nxt.annotation.item, values=LITERAL, version=0)
    # ... whereas a round-2 annotator gets it first (later stages first), with the literal caption.
    second = claim(people["cap1"], project)
    assert (second.item_id, second.stage) == (item.pk, 1)
    ws = workspace_for_annotator(annotation=second, audit=False)
    assert [f.name for f in ws.fields] == ["metaphors", "meme_caption"] and ws.show_text and ws.show_title
    assert ws.earlier[0].fields == [("Literal image caption", [LITERAL["image_caption"]])]
    annotation_submit(annotator=people["cap1"], item=second.item, values=meme(1), version=second.version)

    item.refresh_from_db()
    wanted = project.get_workflow().annotators_for(item, 1)
    assert item.split and wanted == (2 if item.split == "test" else 1)  # pinned at the round-2 claim
    if wanted == 2:
        third = claim(people["cap2"], project)
        assert third.item_id == item.pk
        annotation_submit(annotator=people["cap2"], item=third.item, values=meme(2), version=third.version)
        item.refresh_from_db()
    assert item.stage == Stage.GOLD
    gold = GoldRecord.objects.get(item=item, is_current=True)
    assert gold.values["image_caption"] == [LITERAL["image_caption"]]
    assert gold.values["meme_caption"] == [f"caption {i}" for i in range(1, wanted + 1)]
    assert gold.provenance["meme_caption"]["source"] == "references"
    assert len(gold.provenance["meme_caption"]["annotations"]) == wanted


def test_split_decides_how_many_meme_captions(memecap, people):
    project, items = memecap
    wf = project.get_workflow()
    by_split = _split_items(project, items)
    for name, members in by_split.items():
        for it in members:
            assert wf.annotators_for(it, 1) == (2 if name == "test" else 1)
            assert wf.annotators_for(it, 0) == 1


def test_a_flag_sends_the_item_out_with_its_reason(memecap, people):
    project, items = memecap
    mine = claim(people["lit1"], project)
    with pytest.raises(Invalid):
        item_flag(annotator=people["lit1"], item=mine.item, reason="boring")
    item_flag(annotator=people["lit1"], item=mine.item, reason="hateful", note="slur in the picture")
    item = Item.objects.get(pk=mine.item_id)
    assert item.stage == Stage.EXCLUDED and item.excluded_reason == "hateful: slur in the picture"
    assert HistoryEvent.objects.get(item=item, kind="excluded").new["reason"].startswith("hateful")
    assert not item.assignments.exists()
    with pytest.raises(ItemClosed):
        annotation_submit(annotator=people["lit1"], item=item, values=LITERAL, version=mine.version + 1)
    # Nobody is handed it again.
    for u in people.values():
        result = assignment_claim_next(annotator=u, project=project)
        assert result.annotation is None or result.annotation.item_id != item.pk


def test_a_round_one_annotation_is_closed_once_the_item_moved_on(memecap, people):
    project, _ = memecap
    mine = claim(people["lit1"], project)
    result = annotation_submit(annotator=people["lit1"], item=mine.item, values=LITERAL, version=mine.version)
    with pytest.raises(ItemClosed, match="next stage"):
        annotation_submit(
            annotator=people["lit1"],
            item=mine.item,
            values={"image_caption": "revised"},
            version=result.annotation.version,
        )
    assert Annotation.objects.get(pk=mine.pk).values == LITERAL


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda w: w[0].update(fields=["image_caption", "meme_caption"]), "already filled in by stage"),
        (lambda w: w[1].update(fields=["metaphors"]), "belong to no stage"),
        (lambda w: w[1].update(exclude_workers_of=["later"]), "not an earlier stage"),
        (lambda w: w[0].update(annotators=0), "whole number"),
        (lambda w: w[1].update(annotators={"by": "split", "values": {"dev": 2}}), "train, val or test"),
        (lambda w: w[0].update(gold="adjudicate"), "several stages keeps references"),
        (lambda w: w[0].update(image="sepia"), "image must be one of"),
        (lambda w: w[0].update(flags=["ugly"]), "flags must be among"),
        (lambda w: w[0].update(colour="red"), "unknown key"),
        (lambda w: w[1].update(name="literal"), "another stage has this name"),
    ],
)
def test_workflow_errors_name_the_stage_and_the_rule(change, message):
    data = [dict(s) for s in MEMECAP_WORKFLOW]
    change(data)
    with pytest.raises(SchemaError, match=message):
        Workflow.from_data(data, schema=Schema(MEMECAP_SCHEMA))


def test_an_empty_workflow_is_one_adjudicated_stage_of_every_field():
    wf = Workflow.from_data([], schema=Schema(MEMECAP_SCHEMA), annotators_per_item=3)
    assert len(wf.stages) == 1 and wf.stage(0).fields == ("image_caption", "metaphors", "meme_caption")
    assert wf.stage(0).gold == "adjudicate" and wf.stage(0).annotators == 3 and wf.stage(0).candidates


def test_one_stage_projects_are_unchanged(project, items, annotator_a, annotator_b):
    """Meme3W: one stage, two annotators, stage 0 everywhere."""
    from annotation.factories import MEME3W_HARMFUL

    items_open(items)
    for u in (annotator_a, annotator_b):
        ready(u, project)
        a = claim(u, project)
        assert a.stage == 0 and a.item_id == items[0].pk
        annotation_submit(annotator=u, item=a.item, values=MEME3W_HARMFUL, version=a.version)
    item = Item.objects.get(pk=items[0].pk)
    assert item.stage == Stage.GOLD and item.workflow_stage == 0 and not item.split


def test_caption_agreement_of_the_kept_references(memecap, people):
    """Round-2 meme captions of the same item compared among round-2 annotators: BLEU-4,
    ROUGE-L and token-F1, each with n and a CI; round 1 (one caption per item) has none."""
    from metrics.captions import caption_agreement
    from quality.reports import agreement_report_build

    project, items = memecap
    project.split_ratios = [0, 0, 1]  # every item a test item: two meme captions each
    project.save(update_fields=["split_ratios"])
    captions = {
        "cap1": ["the poster is happy two people like his posts", "people ignore the poster"],
        "cap2": ["the poster is happy that two people like his posts", "nobody reads the poster"],
    }
    # Round 1 by lit1 alone (one literal caption per item); lit1 is then excluded from round 2.
    while (a := assignment_claim_next(annotator=people["lit1"], project=project).annotation) is not None:
        assert a.stage == 0
        annotation_submit(annotator=people["lit1"], item=a.item, values=LITERAL, version=a.version)
    done = {}
    for name in ("cap1", "cap2"):
        for k in range(2):
            a = claim(people[name], project)
            done.setdefault(name, []).append(a.item_id)
            values = {"metaphors": [], "meme_caption": captions[name][k]}
            annotation_submit(annotator=people[name], item=a.item, values=values, version=a.version)
    assert done["cap1"] == done["cap2"]  # the same two items, two captions each
    report = agreement_report_build(project=project)["agreement"]
    fields = {f["field"]: f for f in report["fields"]}
    assert fields["image_caption"]["n"] == 0  # one literal caption per item: nothing to compare
    figures = {fig["key"]: fig for fig in fields["meme_caption"]["figures"]}
    assert {"mean", "bleu", "rouge_l"} <= set(figures)
    assert all(figures[k]["n"] == 2 and figures[k]["ci"] is not None for k in ("mean", "bleu", "rouge_l"))
    pairs = [{1: [captions["cap1"][k]], 2: [captions["cap2"][k]]} for k in range(2)]
    assert figures["rouge_l"]["value"] == pytest.approx(caption_agreement(pairs, "rouge_l").value, abs=1e-6)
    assert figures["bleu"]["value"] == pytest.approx(caption_agreement(pairs, "bleu").value, abs=1e-6)


def test_a_stage_with_its_own_pool_of_workers(memecap, people):
    """MemeCap's rounds were worked by different pools: a stage listing its workers is theirs alone."""
    project, items = memecap
    workflow = [dict(stage) for stage in MEMECAP_WORKFLOW]
    workflow[0]["workers"] = ["lit1", "lit2"]
    workflow[1]["workers"] = ["cap1", "cap2", "cap3"]
    project.workflow = workflow
    project.save(update_fields=["workflow"])
    assert assignment_claim_next(annotator=people["cap1"], project=project).annotation is None  # round 1 is not theirs
    mine = claim(people["lit1"], project)
    annotation_submit(annotator=people["lit1"], item=mine.item, values=LITERAL, version=mine.version)
    # lit2 did not work this item, yet round 2 is not lit2's: lit2 gets the next round-1 item.
    nxt = claim(people["lit2"], project)
    assert nxt.stage == 0 and nxt.item_id != mine.item_id
    second = claim(people["cap1"], project)
    assert (second.item_id, second.stage) == (mine.item_id, 1)
    with pytest.raises(SchemaError, match="workers must list usernames"):
        Workflow.from_data([{**MEMECAP_WORKFLOW[0], "workers": "lit1"}], schema=Schema(MEMECAP_SCHEMA))
