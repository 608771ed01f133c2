"""A reviewer revises their own decision until it is in a published release; the history shows
JSON; the reviewer's page carries the similarity figures."""

from __future__ import annotations

import json

import pytest

from adjudication.models import AdjudicationTask, GoldRecord
from adjudication.selectors import field_similarities, project_thresholds, review_context, reviewer_decisions
from adjudication.services import gold_decide, gold_revise
from annotation.factories import MEME3W_HARMFUL as HARMFUL
from core.errors import Conflict

pytestmark = pytest.mark.django_db


@pytest.fixture
def decided(project, one_item, annotator_a, annotator_b, reviewer, submit):
    submit(annotator_a, project, HARMFUL)
    submit(annotator_b, project, {**HARMFUL, "target_category": "gender", "visual_region": []})
    task = AdjudicationTask.objects.get()
    from adjudication.services import adjudication_claim

    adjudication_claim(task=task, reviewer=reviewer)
    task.refresh_from_db()
    return gold_decide(
        task=task,
        reviewer=reviewer,
        version=task.version,
        note="B's category",
        decisions={"target_category": {"pick": 2}, "visual_region": {"value": [[1, 2, 30, 40]]}},
    )


def test_revise_reopens_the_reviewers_own_decision_with_its_draft(decided, reviewer, client_for, project):
    c = client_for(reviewer)
    home = c.get(f"/p/{project.slug}/review/").content.decode()
    assert f'id="decision-{decided.pk}"' in home and "Revise" in home and "gender" in home
    r = c.post(f"/p/{project.slug}/review/gold/{decided.pk}/revise")
    task = AdjudicationTask.objects.get(reason="revision")
    assert r.status_code == 302 and r["Location"] == f"/p/{project.slug}/review/{task.pk}/"
    assert task.status == "claimed" and task.reviewer == reviewer
    assert task.draft == {
        "decisions": {"target_category": {"pick": 2}, "visual_region": {"value": [[1, 2, 30, 40]]}},
        "note": "B's category",
    }
    decided.item.refresh_from_db()
    assert decided.item.stage == "adjudication"
    assert GoldRecord.objects.get(item=decided.item, is_current=True).pk == decided.pk  # gold stays meanwhile
    with pytest.raises(Conflict):
        gold_revise(record=decided, reviewer=reviewer)  # already open


def test_only_the_deciding_reviewer_and_never_after_a_release(
    decided, reviewer, lead, make_user, client_for, project, monkeypatch
):
    from projects.services import membership_add

    other = make_user("reviewer2")
    membership_add(project=project, user=other, role="reviewer")
    assert client_for(other).post(f"/p/{project.slug}/review/gold/{decided.pk}/revise").status_code == 404
    with pytest.raises(Conflict):
        gold_revise(record=decided, reviewer=other)
    # Once a release is published after the decision, it is locked (a lead sends items back).
    from adjudication import selectors

    monkeypatch.setattr(selectors, "RELEASE_TIME_SOURCES", [lambda p: decided.created_at])
    with pytest.raises(Conflict, match="published release"):
        gold_revise(record=decided, reviewer=reviewer)
    (d,) = reviewer_decisions(project=project, user=reviewer)
    assert d.published and not d.revisable
    home = client_for(reviewer).get(f"/p/{project.slug}/review/").content.decode()
    assert "in a published release" in home and "button" in home and 'class="secondary small revise"' not in home


def test_a_real_release_locks_the_decision(decided, reviewer, lead, project):
    from exports.services import export_job_run, export_job_start

    export_job_run(job=export_job_start(project=project, user=lead, enqueue=False))
    with pytest.raises(Conflict, match="published release"):
        gold_revise(record=decided, reviewer=reviewer)


def test_history_shows_json_not_python_reprs(decided, lead, client_for, project):
    body = client_for(lead).get(f"/p/{project.slug}/items/{decided.item_id}/history").content.decode()
    assert "None" not in body and "&#x27;label&#x27;" not in body
    assert json.dumps({"visual_region": [[1, 2, 30, 40]]})[1:-1].replace('"', "&quot;") in body
    assert "&quot;visual_region&quot;: []" in body  # annotator B's empty region, as JSON


def test_similarities_use_the_type_measure_and_the_project_threshold(project, decided):
    project.thresholds = {"entity_f1": 0.9}
    spec = project.get_schema().by_name["target_entity"]
    th = project_thresholds(project)
    (sim,) = field_similarities(spec, ["Zorgians", "people from Planet Zorg"], thresholds=th, lexicon={})
    assert sim.measure == "F1_rel" and sim.threshold == 0.9 and sim.within is False
    (same,) = field_similarities(
        spec, ["people from Planet Zorg", "people from planet zorg"], thresholds=th, lexicon={}
    )
    assert same.score == 1.0 and same.within
    region = project.get_schema().by_name["visual_region"]
    (iou,) = field_similarities(
        {**region, "threshold": 0.4}, [[[0, 0, 100, 100]], [[0, 0, 100, 50]]], thresholds=th, lexicon={}
    )
    assert iou.text == "IoU 0.50 ≥ 0.40"
    task = AdjudicationTask.objects.get()
    rows = {r.name: r for r in review_context(task=task)["rows"]}
    assert rows["target_category"].similarities[0].text == "different"
    assert rows["visual_region"].similarities[0].text == "IoU 0.00 < 0.75"


def test_error_pages_say_what_is_missing_and_link_back(client_for, annotator_a, reviewer, outsider, project, one_item):
    c = client_for(reviewer)
    r = c.get(f"/p/{project.slug}/annotate/", HTTP_REFERER=f"http://testserver/p/{project.slug}/")
    body = r.content.decode()
    assert r.status_code == 403
    assert "Your role in this project does not allow this" in body and "annotator" in body
    assert f'href="http://testserver/p/{project.slug}/"' in body and "Your projects" in body
    r = c.get(f"/p/{project.slug}/review/999999/")
    assert r.status_code == 404 and "No such adjudication" in r.content.decode()
    r = client_for(outsider).get(f"/p/{project.slug}/review/")
    assert r.status_code == 404 and "No such project" in r.content.decode()
    assert "not one of its members" in r.content.decode()
