from __future__ import annotations

import io
import json

import pytest

from adjudication.models import AdjudicationTask, GoldRecord, LexiconVersion
from adjudication.services import lexicon_current
from annotation.factories import MEME3W_HARMFUL as HARMFUL

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(project, one_item, annotator_a, annotator_b, submit):
    submit(annotator_a, project, HARMFUL)
    submit(annotator_b, project, {**HARMFUL, "target_category": "gender", "visual_region": [[600, 600, 900, 900]]})
    return AdjudicationTask.objects.get()


def post_json(client, url, data):
    return client.post(url, json.dumps(data), content_type="application/json")


def test_review_page_shows_annotators_anonymously_and_no_model_identity(client_for, reviewer, task, project):
    from annotation.models import Annotation

    Annotation.objects.filter(pk__in=task.annotation_ids).update(
        provenance={"target_category": {"letter": "B", "candidate_id": 999, "edited": False}}
    )
    c = client_for(reviewer)
    r = c.get(f"/p/{project.slug}/review/{task.pk}/")
    assert r.status_code == 200
    body = r.content.decode()
    assert "Annotator 1" in body and "Annotator 2" in body
    assert "annotator_a" not in body and "annotator_b" not in body
    assert "candidate_id" not in body and "999" not in body
    assert 'class="field-row disagree"' in body and 'class="field-row agree"' in body
    task.refresh_from_db()
    assert task.status == "claimed" and task.reviewer == reviewer


def test_annotator_of_the_item_cannot_open_its_adjudication(client_for, annotator_a, task, project):
    from projects.services import membership_add

    membership_add(project=project, user=annotator_a, role="reviewer")
    c = client_for(annotator_a)
    r = c.get(f"/p/{project.slug}/review/{task.pk}/")
    assert r.status_code == 403
    assert (
        post_json(c, f"/p/{project.slug}/review/{task.pk}/decide", {"decisions": {}, "version": 0}).status_code == 403
    )


def test_outsider_and_wrong_roles_are_refused(client_for, outsider, annotator_a, lead, task, project, one_item):
    for url in [
        f"/p/{project.slug}/review/",
        f"/p/{project.slug}/review/{task.pk}/",
        f"/p/{project.slug}/lexicon/",
        f"/p/{project.slug}/items/",
        f"/p/{project.slug}/items/{one_item.pk}/history",
        f"/p/{project.slug}/lexicon.csv",
    ]:
        assert client_for(outsider).get(url).status_code == 404, url
    assert client_for(annotator_a).get(f"/p/{project.slug}/review/").status_code == 403
    assert client_for(lead).get(f"/p/{project.slug}/review/{task.pk}/").status_code == 403  # not a reviewer
    for url in [
        f"/p/{project.slug}/lexicon/",
        f"/p/{project.slug}/items/",
        f"/p/{project.slug}/items/{one_item.pk}/history",
    ]:
        assert client_for(annotator_a).get(url).status_code == 403, url


def test_decide_over_http_validation_stale_and_success(client_for, reviewer, task, project):
    c = client_for(reviewer)
    assert c.post(f"/p/{project.slug}/review/next").status_code == 302
    url = f"/p/{project.slug}/review/{task.pk}/decide"
    assert c.post(url, b"not json", content_type="application/json").status_code == 400
    r = post_json(c, url, {"decisions": {"target_category": {"pick": 1}}, "version": 0})
    assert r.status_code == 400 and "visual_region" in r.json()["errors"]
    d = post_json(c, f"/p/{project.slug}/review/{task.pk}/draft", {"draft": {"decisions": {}}, "version": 0})
    assert d.json() == {"version": 1}
    stale = post_json(
        c, url, {"decisions": {"target_category": {"pick": 1}, "visual_region": {"pick": 2}}, "version": 0}
    )
    assert stale.status_code == 409 and "changed elsewhere" in stale.json()["detail"]
    ok = post_json(
        c, url, {"decisions": {"target_category": {"pick": 1}, "visual_region": {"pick": 2}}, "version": 1, "note": "x"}
    )
    assert ok.status_code == 200 and ok.json()["revision"] == 1
    assert GoldRecord.objects.get().provenance["visual_region"]["from_annotator"] == 2


def test_lexicon_page_edit_csv_roundtrip_and_errors(client_for, lead, project):
    c = client_for(lead)
    v0, seeded = lexicon_current(project=project)
    assert v0 == 1 and seeded["woman"] == "women"
    r = c.post(
        f"/p/{project.slug}/lexicon/",
        {"entries": "woman, women\nZorgians, people from Planet Zorg", "note": "add zorg"},
    )
    assert r.status_code == 302
    assert lexicon_current(project=project) == (2, {"woman": "women", "Zorgians": "people from Planet Zorg"})
    bad = c.post(f"/p/{project.slug}/lexicon/", {"entries": "cats, dogs\ndogs, birds"})
    assert bad.status_code == 200 and b"lexicon chain" in bad.content
    assert LexiconVersion.objects.filter(project=project).count() == 2
    conflict = c.post(f"/p/{project.slug}/lexicon/", {"entries": "Muslims, Muslim people\nmuslims., Islam"})
    assert conflict.status_code == 200 and b"maps to both" in conflict.content
    csv_text = c.get(f"/p/{project.slug}/lexicon.csv").content.decode()
    assert csv_text.splitlines()[0] == "variant,canonical" and "Zorgians,people from Planet Zorg" in csv_text
    f = io.BytesIO(b"variant,canonical\nJews,Jewish people\nbad row only\n")
    f.name = "lex.csv"
    r = c.post(f"/p/{project.slug}/lexicon/", {"file": f})
    assert r.status_code == 200 and b"row 3: expected 2 columns" in r.content
    f = io.BytesIO(b"variant,canonical\nJews,Jewish people\n")
    f.name = "lex.csv"
    assert c.post(f"/p/{project.slug}/lexicon/", {"file": f}).status_code == 302
    assert lexicon_current(project=project) == (3, {"Jews": "Jewish people"})


def test_history_page_and_send_back(client_for, lead, project, one_item, annotator_a, annotator_b, submit):
    submit(annotator_a, project, HARMFUL)
    submit(annotator_b, project, HARMFUL)
    c = client_for(lead)
    r = c.get(f"/p/{project.slug}/items/{one_item.pk}/history")
    body = r.content.decode()
    assert r.status_code == 200 and "Revision 1 (current)" in body and "identical" in body and "annotator_a" in body
    r = c.post(f"/p/{project.slug}/items/{one_item.pk}/send-back", {"note": "check entity"})
    assert r.status_code == 302
    assert AdjudicationTask.objects.get(item=one_item).reason == "sent_back"
    r = c.post(f"/p/{project.slug}/items/{one_item.pk}/send-back", {"note": "again"}, follow=True)
    assert b"Only gold items" in r.content
