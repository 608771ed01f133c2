"""A stage's form that starts from the candidates' agreement (projects.workflow ``prefill``)."""

from __future__ import annotations

import pytest

from annotation.factories import MEME3W_HARMFUL, MEME3W_NOT_HARMFUL, claim
from annotation.selectors import annotation_state
from annotation.services.claims import candidates_agreement
from candidates.factories import candidates_create
from candidates.selectors import AnonymousCandidate, candidate_ids_for_annotator
from projects.fieldtypes import SchemaError
from projects.workflow import Workflow
from quality.anchoring import anchoring_report
from workflow.services import annotation_submit

pytestmark = pytest.mark.django_db

HARMFUL = MEME3W_HARMFUL
NOT_HARMFUL = {k: v for k, v in MEME3W_NOT_HARMFUL.items() if k != "visual_region"}
BOX = MEME3W_HARMFUL["visual_region"]


def shown(*fields: dict) -> dict:
    return {
        letter: (100 + i, AnonymousCandidate(letter=letter, fields=f))
        for i, (letter, f) in enumerate(zip("ABC", fields))
    }


def prefilled(project) -> None:
    project.workflow = [
        {"name": "annotate", "fields": project.get_schema().names, "annotators": 2, "prefill": "agreement"}
    ]
    project.save(update_fields=["workflow"])


def test_a_field_is_filled_only_on_a_majority_of_all_candidates(project):
    schema = project.get_schema()
    other = {**HARMFUL, "target_entity": "Zorgians", "visual_region": []}
    values, prov = candidates_agreement(
        schema=schema, shown=shown(HARMFUL, other, {**HARMFUL, "target_category": "religion and caste"})
    )
    # label: 3/3; entity and mention: A and C (2/3); category: A and B; boxes: all three differ
    # as values (one box vs none vs one box): A and C agree on the same box.
    assert values == {
        "label": "harmful",
        "target_category": "group background",
        "target_entity": "people from Planet Zorg",
        "text_mention": "people from Planet Zorg",
        "visual_region": BOX,
    }
    assert prov["label"] == {"letter": "A", "candidate_id": 100, "edited": False}
    assert {name: p["letter"] for name, p in prov.items()} == {
        "label": "A",
        "target_category": "A",
        "target_entity": "A",
        "text_mention": "A",
        "visual_region": "A",
    }
    # The first agreeing letter carries the provenance: B and C agree on a category A lacks.
    values, prov = candidates_agreement(
        schema=schema,
        shown=shown(HARMFUL, {**HARMFUL, "target_category": "gender"}, {**HARMFUL, "target_category": "gender"}),
    )
    assert values["target_category"] == "gender" and prov["target_category"]["letter"] == "B"


def test_disagreement_a_missing_field_and_too_few_candidates_leave_fields_empty(project):
    schema = project.get_schema()
    a = dict(HARMFUL)
    b = {**HARMFUL, "target_entity": "Zorgians"}
    c = {k: v for k, v in HARMFUL.items() if k != "target_entity"}  # removed as malformed
    values, prov = candidates_agreement(schema=schema, shown=shown(a, b, c))
    assert "target_entity" not in values and "target_entity" not in prov  # 1 of 3 each, and one has none
    assert values["label"] == "harmful"
    # Two candidates: one of them is not more than half.
    values, _ = candidates_agreement(schema=schema, shown=shown(a, b))
    assert "target_entity" not in values and values["target_category"] == "group background"
    assert candidates_agreement(schema=schema, shown=shown(a)) == ({}, {})
    assert candidates_agreement(schema=schema, shown={}) == ({}, {})


def test_boxes_compare_as_sets_and_an_absent_value_can_be_the_agreement(project):
    schema = project.get_schema()
    two = [*BOX, [500, 500, 600, 600]]
    values, _ = candidates_agreement(
        schema=schema,
        shown=shown({**HARMFUL, "visual_region": two}, {**HARMFUL, "visual_region": two[::-1]}, HARMFUL),
    )
    assert sorted(values["visual_region"]) == sorted(two)
    values, prov = candidates_agreement(
        schema=schema,
        shown=shown(
            {**HARMFUL, "text_mention": None}, {**HARMFUL, "text_mention": "Zorg"}, {**HARMFUL, "text_mention": None}
        ),
    )
    # "No mention" is a value two candidates agree on: it is kept, with its provenance.
    assert values["text_mention"] is None and prov["text_mention"]["letter"] == "A"


def test_fields_a_filled_value_hides_stay_empty(project):
    schema = project.get_schema()
    box_only = {**NOT_HARMFUL, "visual_region": [[1, 2, 3, 4]]}
    values, prov = candidates_agreement(
        schema=schema, shown=shown(box_only, {**box_only, "label": "non-harmful"}, HARMFUL)
    )
    assert values == {"label": "non-harmful"} and set(prov) == {"label"}


def test_prefill_needs_a_stage_that_shows_candidates(project):
    names = project.get_schema().names
    with pytest.raises(SchemaError, match="prefill must be one of"):
        Workflow.from_data([{"name": "a", "fields": names, "prefill": "majority"}], schema=project.get_schema())
    with pytest.raises(SchemaError, match="must show candidates"):
        Workflow.from_data(
            [{"name": "a", "fields": names, "candidates": False, "prefill": "agreement"}], schema=project.get_schema()
        )
    wf = Workflow.from_data([{"name": "a", "fields": names, "prefill": "agreement"}], schema=project.get_schema())
    assert wf.prefills and wf.stages[0].prefill == "agreement"
    assert not Workflow.from_data([{"name": "a", "fields": names}], schema=project.get_schema()).prefills


def test_a_claim_starts_from_the_agreement_and_keeping_it_counts_as_taken_unedited(project, open_items, ann_a):
    prefilled(project)
    other = {**HARMFUL, "target_entity": "Zorgians", "visual_region": []}
    candidates_create(open_items[0], [HARMFUL, other, {**HARMFUL, "visual_region": []}])
    mine = claim(ann_a, project)
    assert mine.item == open_items[0]
    seen = candidate_ids_for_annotator(item=mine.item, user=ann_a)
    want, want_prov = candidates_agreement(schema=project.get_schema(), shown=seen)
    assert want["target_entity"] == "people from Planet Zorg" and want["visual_region"] == []
    state = annotation_state(mine)
    assert state["values"] == want
    # The browser gets letters, never the stored candidate ids.
    assert state["provenance"] == {k: {"letter": p["letter"], "edited": False} for k, p in want_prov.items()}
    assert "candidate_id" not in str(state)
    # Submitting the form as it started (what the page sends) keeps the provenance, unedited.
    browser = {k: {"letter": p["letter"]} for k, p in state["provenance"].items()}
    annotation_submit(annotator=ann_a, item=mine.item, values=state["values"], version=0, provenance=browser)
    mine.refresh_from_db()
    assert mine.provenance == want_prov
    report = anchoring_report(project=project, with_gold_scores=False)
    taken = sum(m["total"]["taken"] for m in report["models"])
    assert taken == len(want_prov)


def test_without_prefill_and_without_candidates_the_form_starts_empty(project, open_items, ann_a, ann_b, ann_c):
    candidates_create(open_items[0], [HARMFUL, HARMFUL, HARMFUL])
    mine = claim(ann_a, project)
    assert mine.item == open_items[0] and mine.values == {} and mine.provenance == {}
    prefilled(project)
    other = claim(ann_b, project)  # the same item, now with the stage pre-filling
    assert other.item == open_items[0] and other.values["target_entity"] == "people from Planet Zorg"
    # An item without candidates starts empty even on a pre-filling stage.
    third = claim(ann_c, project)  # the first item's two slots are held
    assert third.item != open_items[0] and third.values == {} and third.provenance == {}


def test_the_lead_s_anchoring_page_says_when_the_form_is_prefilled(project, lead, client_for):
    from django.urls import reverse

    url = reverse("quality_anchoring", args=[project.slug])
    page = client_for(lead).get(url)
    assert page.status_code == 200 and b'id="prefill-warning"' not in page.content
    prefilled(project)
    page = client_for(lead).get(url)
    assert page.status_code == 200 and b'id="prefill-warning"' in page.content


def test_a_lead_turns_it_on_in_study_settings_and_a_bad_mode_is_named(project, lead, client_for):
    import json

    from django.urls import reverse

    url = reverse("settings_page", args=[project.slug])
    names = project.get_schema().names
    client = client_for(lead)
    bad = [{"name": "annotate", "fields": names, "annotators": 2, "prefill": "majority"}]
    page = client.post(url, {"workflow": json.dumps(bad)})
    assert page.status_code == 400 and b"prefill must be one of none, agreement" in page.content
    project.refresh_from_db()
    assert not project.workflow  # nothing saved
    good = [{**bad[0], "prefill": "agreement"}]
    page = client.post(url, {"workflow": json.dumps(good)})
    assert page.status_code == 302
    project.refresh_from_db()
    assert project.get_workflow().stages[0].prefill == "agreement"
