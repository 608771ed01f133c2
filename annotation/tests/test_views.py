"""Pages and JSON endpoints: access, the content warning, blindness on the raw bytes, query counts."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from annotation.factories import MEME3W_HARMFUL, claim, items_open, ready
from annotation.models import Annotation, AnnotatorPreference
from annotation.services import annotation_audit_assign, annotation_save_draft
from annotation.tests.test_submit import CANDIDATE_REPLIES
from candidates.factories import MODEL_NAMES, PROVIDER_NAMES, candidates_create
from workflow.services import annotation_submit

pytestmark = pytest.mark.django_db

SECRET_ENTITY = "Xylophonic Quokka Brigade"


def page_urls(slug, item_id):
    return [
        ("get", reverse("annotate_home", args=[slug])),
        ("get", reverse("annotate_progress", args=[slug])),
        ("post", reverse("annotate_next", args=[slug])),
        ("get", reverse("annotate_item", args=[slug, item_id])),
        ("post", reverse("annotate_skip", args=[slug, item_id])),
        ("get", reverse("annotate_warning", args=[slug])),
        ("post", reverse("annotate_preferences", args=[slug])),
        ("get", reverse("audit_home", args=[slug])),
        ("get", reverse("audit_item", args=[slug, item_id])),
        ("get", reverse("api_annotate_state", args=[slug, item_id])),
        ("post", reverse("api_annotate_draft", args=[slug, item_id])),
        ("post", reverse("api_annotate_submit", args=[slug, item_id])),
        ("post", reverse("api_annotate_skip", args=[slug, item_id])),
        ("post", reverse("api_annotate_next", args=[slug])),
        ("get", reverse("api_audit_state", args=[slug, item_id])),
        ("post", reverse("api_audit_draft", args=[slug, item_id])),
        ("post", reverse("api_audit_submit", args=[slug, item_id])),
        ("post", reverse("api_audit_skip", args=[slug, item_id])),
    ]


def call(client, method, url, data=None):
    if method == "get":
        return client.get(url)
    return client.post(url, data=json.dumps(data or {}), content_type="application/json")


def test_outsider_gets_404_everywhere(project, open_items, outsider, client_for):
    c = client_for(outsider)
    for method, url in page_urls(project.slug, open_items[0].pk):
        assert call(c, method, url).status_code == 404, url


def test_wrong_role_gets_403_everywhere(project, open_items, reviewer, client_for):
    c = client_for(reviewer)
    for method, url in page_urls(project.slug, open_items[0].pk):
        assert call(c, method, url).status_code == 403, url


def test_annotator_cannot_use_audit_pages_and_auditor_cannot_annotate(project, open_items, ann_a, auditor, client_for):
    ready(auditor, project)
    annotation_audit_assign(auditor=auditor, item=open_items[0])
    c = client_for(ann_a)
    assert c.get(reverse("audit_item", args=[project.slug, open_items[0].pk])).status_code == 403
    assert c.get(reverse("api_audit_state", args=[project.slug, open_items[0].pk])).status_code == 403
    c = client_for(auditor)
    assert c.get(reverse("annotate_item", args=[project.slug, open_items[0].pk])).status_code == 403
    assert c.post(reverse("annotate_next", args=[project.slug])).status_code == 403


def test_anonymous_is_sent_to_login_and_api_answers_401(project, open_items, client):
    r = client.get(reverse("annotate_home", args=[project.slug]))
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]
    r = client.post(
        reverse("api_annotate_draft", args=[project.slug, open_items[0].pk]), data="{}", content_type="application/json"
    )
    assert r.status_code == 401


def test_items_not_assigned_to_the_caller_are_404(project, open_items, ann_a, ann_b, client_for):
    theirs = claim(ann_b, project)
    c = client_for(ann_a)
    assert c.get(reverse("annotate_item", args=[project.slug, theirs.item_id])).status_code == 404
    r = c.post(
        reverse("api_annotate_draft", args=[project.slug, theirs.item_id]),
        data=json.dumps({"values": {}, "version": 0}),
        content_type="application/json",
    )
    assert r.status_code == 404
    assert c.get(reverse("annotate_item", args=[project.slug, 99999999])).status_code == 404


def test_content_warning_comes_first_and_is_remembered(project, open_items, annotator_a, client_for):
    c = client_for(annotator_a)
    home = reverse("annotate_home", args=[project.slug])
    r = c.get(home)
    assert r.status_code == 302 and r["Location"].startswith(reverse("annotate_warning", args=[project.slug]))
    r = c.post(reverse("annotate_next", args=[project.slug]))
    assert r.status_code == 302 and "warning" in r["Location"]
    assert not Annotation.objects.exists()
    page = c.get(r["Location"])
    assert b"offensive" in page.content and b"skip any item" in page.content
    r = c.post(reverse("annotate_warning", args=[project.slug]), {"next": home, "blur_images": "on"})
    assert r.status_code == 302 and r["Location"] == home
    pref = AnnotatorPreference.objects.get(user=annotator_a, project=project)
    assert pref.content_warning_accepted_at and pref.blur_images
    assert c.get(home).status_code == 200
    # An off-site "next" is ignored.
    r = c.post(reverse("annotate_warning", args=[project.slug]), {"next": "https://evil.example/"})
    assert r["Location"] == home


def test_next_claims_and_redirects_then_reports_an_empty_queue(project, items, ann_a, client_for):
    c = client_for(ann_a)
    r = c.post(reverse("annotate_next", args=[project.slug]))
    assert r["Location"] == reverse("annotate_home", args=[project.slug])
    assert b"No items are waiting" in c.get(r["Location"]).content
    items_open(items[:1])
    r = c.post(reverse("annotate_next", args=[project.slug]))
    assert r["Location"] == reverse("annotate_item", args=[project.slug, items[0].pk])
    assert c.get(r["Location"]).status_code == 200
    assert Annotation.objects.get(annotator=ann_a).opened_at is not None


def test_workspace_is_generated_from_the_schema(project, open_items, ann_a, client_for):
    item = claim(ann_a, project).item
    body = client_for(ann_a).get(reverse("annotate_item", args=[project.slug, item.pk])).content.decode()
    for widget in ("radio", "entity", "span", "boxes"):
        assert f'data-widget="{widget}"' in body
    assert 'data-visible-field="label" data-visible-in="harmful"' in body
    assert reverse("item_image", args=[project.slug, item.pk]) in body
    assert "Guideline and taxonomy" in body and "TARGET CATEGORIES" in body
    assert "<script>" not in body and "style=" not in body
    assert 'type="module" src="/static/annotation/workspace.js"' in body


@pytest.mark.parametrize(
    "preset, widgets",
    [
        ("aha", ["radio", "checkboxes"]),
        ("memecap", ["textarea"]),  # round 1 of 2: the literal caption only
    ],
)
def test_other_presets_render_their_widgets(lead, make_user, tmp_path, client_for, preset, widgets):
    from projects.factories import items_create, project_with_members

    user = make_user("ann_" + preset)
    project = project_with_members(preset, preset=preset, lead=[lead], annotator=[user])
    items_open(items_create(project, tmp_path / preset, 1))
    ready(user, project)
    item = claim(user, project).item
    body = client_for(user).get(reverse("annotate_item", args=[project.slug, item.pk])).content.decode()
    for widget in widgets:
        assert f'data-widget="{widget}"' in body
    if preset == "aha":
        assert "data-exclusive" in body  # "Other" cannot be combined
        assert 'data-visible-in="Not-Hateful"' in body
    if preset == "memecap":  # round 1 hides the meme's text and offers the flags
        assert 'data-widget="pairlist"' not in body and item.text not in body
        assert 'id="flag-form"' in body and "Literal image caption" in body


def test_blindness_on_raw_html_and_json(project, open_items, ann_a, ann_b, client_for):
    candidates_create(open_items[0], CANDIDATE_REPLIES)
    mine = claim(ann_a, project)
    annotation_submit(
        annotator=ann_a,
        item=mine.item,
        version=0,
        provenance={"label": {"letter": "A"}},
        values={**MEME3W_HARMFUL, "target_entity": SECRET_ENTITY},
    )
    theirs = claim(ann_b, project)
    assert theirs.item_id == mine.item_id
    c = client_for(ann_b)
    responses = [
        c.get(reverse("annotate_item", args=[project.slug, theirs.item_id])),
        c.get(reverse("api_annotate_state", args=[project.slug, theirs.item_id])),
        c.get(reverse("annotate_home", args=[project.slug])),
        c.get(reverse("annotate_progress", args=[project.slug])),
    ]
    from candidates.models import Candidate

    for r in responses:
        assert r.status_code == 200
        raw = r.content
        assert SECRET_ENTITY.encode() not in raw
        assert b"annotator_a" not in raw
        for name in PROVIDER_NAMES + MODEL_NAMES:
            assert name.encode() not in raw
        assert b"secret reasoning" not in raw  # the models' think fields
        assert b"candidate_id" not in raw
    state = responses[1].json()
    assert [c["letter"] for c in state["candidates"]] == ["A", "B", "C"]
    assert set(state) == {"annotation", "item", "candidates"}
    assert state["annotation"]["values"] == {}
    # Candidates are there, anonymized (their values are fine to show).
    assert b"Zorg monks" in responses[0].content
    # The first annotator's own page: their values, letters but never candidate ids.
    own = client_for(ann_a).get(reverse("annotate_item", args=[project.slug, mine.item_id])).content
    assert SECRET_ENTITY.encode() in own
    assert b"candidate_id" not in own
    for cand in Candidate.objects.all():
        assert f'"candidate_id": {cand.pk}'.encode() not in own


def test_audit_page_loads_no_candidates(project, open_items, auditor, client_for):
    candidates_create(open_items[0], CANDIDATE_REPLIES)
    ready(auditor, project)
    annotation_audit_assign(auditor=auditor, item=open_items[0])
    c = client_for(auditor)
    page = c.get(reverse("audit_item", args=[project.slug, open_items[0].pk]))
    state = c.get(reverse("api_audit_state", args=[project.slug, open_items[0].pk]))
    assert page.status_code == 200 and state.status_code == 200
    for raw in (page.content, state.content):
        assert b"Zorg monks" not in raw and b"Candidate A" not in raw
        for name in PROVIDER_NAMES + MODEL_NAMES:
            assert name.encode() not in raw
    assert state.json()["candidates"] == []
    assert b"blind audit" in page.content
    listing = c.get(reverse("audit_home", args=[project.slug]))
    assert reverse("audit_item", args=[project.slug, open_items[0].pk]).encode() in listing.content
    r = c.post(
        reverse("api_audit_submit", args=[project.slug, open_items[0].pk]),
        data=json.dumps({"values": MEME3W_HARMFUL, "version": 0}),
        content_type="application/json",
    )
    assert r.status_code == 200 and r.json()["status"] == "submitted"


def test_api_draft_submit_and_conflicts(project, open_items, ann_a, client_for):
    item = claim(ann_a, project).item
    c = client_for(ann_a)
    draft = reverse("api_annotate_draft", args=[project.slug, item.pk])
    submit = reverse("api_annotate_submit", args=[project.slug, item.pk])
    r = call(c, "post", draft, {"values": {"label": "harmful"}, "version": 0, "time_spent_ms": 700})
    assert r.status_code == 200 and r.json()["version"] == 1 and r.json()["holds_slot"] is True
    r = call(c, "post", submit, {"values": {"label": "harmful"}, "version": 1})
    assert r.status_code == 400 and r.json()["errors"]["target_category"] == "is required"
    r = call(c, "post", draft, {"values": {"label": "non-harmful"}, "version": 0})
    assert r.status_code == 409 and r.json()["code"] == "stale" and "another tab" in r.json()["detail"]
    for bad in (
        {"values": "x", "version": 1},
        {"values": {}},
        {"values": {}, "version": "one"},
        {"values": {}, "version": 1, "time_spent_ms": -5},
        {"values": {"label": ["a"]}, "version": 1},
    ):
        r = call(c, "post", draft, bad)
        assert r.status_code == 400, bad
    r = c.post(draft, data="not json", content_type="application/json")
    assert r.status_code == 400
    r = call(c, "post", submit, {"values": MEME3W_HARMFUL, "version": 1})
    assert r.status_code == 200 and r.json()["status"] == "submitted" and r.json()["version"] == 2
    assert Annotation.objects.get(annotator=ann_a).time_spent_ms == 700


def test_skip_view_and_api(project, open_items, ann_a, client_for):
    c = client_for(ann_a)
    first = claim(ann_a, project)
    r = c.post(reverse("annotate_skip", args=[project.slug, first.item_id]), {"reason": ""})
    assert r["Location"] == reverse("annotate_item", args=[project.slug, first.item_id])
    assert Annotation.objects.get(pk=first.pk).status == "draft"
    r = c.post(reverse("annotate_skip", args=[project.slug, first.item_id]), {"reason": "disturbing"})
    assert r["Location"] == reverse("annotate_home", args=[project.slug])
    assert Annotation.objects.get(pk=first.pk).skip_reason == "disturbing"
    second = claim(ann_a, project)
    r = call(c, "post", reverse("api_annotate_skip", args=[project.slug, second.item_id]), {"reason": "nope"})
    assert r.status_code == 400
    r = call(
        c, "post", reverse("api_annotate_skip", args=[project.slug, second.item_id]), {"reason": "unclear_category"}
    )
    assert r.status_code == 200 and r.json()["status"] == "skipped"


def test_api_next_needs_the_content_warning(project, open_items, annotator_a, client_for):
    c = client_for(annotator_a)
    r = c.post(reverse("api_annotate_next", args=[project.slug]))
    assert r.status_code == 403 and r.json()["code"] == "content_warning"
    ready(annotator_a, project)
    r = c.post(reverse("api_annotate_next", args=[project.slug]))
    assert r.json()["outcome"] == "claimed" and r.json()["item_id"] == open_items[0].pk


def test_progress_partial_shows_break_when_capped(project, open_items, ann_a, client_for):
    project.session_item_cap = 1
    project.save()
    c = client_for(ann_a)
    mine = claim(ann_a, project)
    r = c.get(reverse("annotate_progress", args=[project.slug]))
    assert b'id="next-btn"' in r.content and b"remaining in the queue" in r.content
    annotation_submit(annotator=ann_a, item=mine.item, values=MEME3W_HARMFUL, version=0)
    r = c.get(reverse("annotate_progress", args=[project.slug]))
    assert b'id="break-msg"' in r.content and b'id="next-btn"' not in r.content
    r = c.post(reverse("annotate_next", args=[project.slug]), follow=True)
    assert b"Take a break" in r.content


def test_blur_preference_toggles_with_htmx(project, open_items, ann_a, client_for):
    c = client_for(ann_a)
    item = claim(ann_a, project).item
    url = reverse("annotate_preferences", args=[project.slug])
    r = c.post(url, {"blur_images": "on"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and b'id="blur-toggle"' in r.content and b"checked" in r.content
    page = c.get(reverse("annotate_item", args=[project.slug, item.pk])).content
    assert b"ws-stage blurred" in page and b'id="unblur"' in page
    c.post(url, {}, HTTP_HX_REQUEST="true")
    assert b"ws-stage blurred" not in c.get(reverse("annotate_item", args=[project.slug, item.pk])).content


def test_read_only_after_the_item_leaves_annotation(project, open_items, ann_a, ann_b, client_for):
    mine = claim(ann_a, project)
    annotation_submit(annotator=ann_a, item=mine.item, values=MEME3W_HARMFUL, version=0)
    annotation_submit(annotator=ann_b, item=claim(ann_b, project).item, values=MEME3W_HARMFUL, version=0)
    page = client_for(ann_a).get(reverse("annotate_item", args=[project.slug, mine.item_id])).content
    assert b'<fieldset id="ann-fields" disabled>' in page and b'id="submit-btn"' not in page


def test_expired_draft_page_takes_a_free_slot_back(project, open_items, ann_a, client_for):
    from annotation.tests.test_assignment import expire

    mine = claim(ann_a, project)
    annotation_save_draft(annotator=ann_a, item=mine.item, values={"label": "harmful"}, version=0)
    expire(mine)
    r = client_for(ann_a).get(reverse("api_annotate_state", args=[project.slug, mine.item_id]))
    assert r.json()["annotation"]["holds_slot"] is False  # the JSON state does not claim
    page = client_for(ann_a).get(reverse("annotate_item", args=[project.slug, mine.item_id]))
    state = json.loads(page.context["state_json"])
    assert state["holds_slot"] is True and state["values"]["label"] == "harmful"


def test_a_schema_change_never_breaks_a_kept_draft(project, open_items, ann_a, client_for):
    from projects.presets import MEME3W_SCHEMA
    from projects.services import project_schema_update

    mine = claim(ann_a, project)
    annotation_save_draft(
        annotator=ann_a,
        item=mine.item,
        version=0,
        values={"label": "harmful", "target_entity": "Zorgians", "visual_region": [[1, 2, 30, 40]]},
    )
    fields = [f for f in MEME3W_SCHEMA["fields"] if f["name"] != "target_entity"]
    fields = [{**f, "type": "entity"} if f["name"] == "visual_region" else f for f in fields]
    project_schema_update(project=project, schema={**MEME3W_SCHEMA, "fields": fields})
    c = client_for(ann_a)
    page = c.get(reverse("annotate_item", args=[project.slug, mine.item_id]))
    assert page.status_code == 200
    state = json.loads(page.context["state_json"])
    assert state["values"] == {"label": "harmful", "target_category": None, "text_mention": None}
    r = call(
        c,
        "post",
        reverse("api_annotate_draft", args=[project.slug, mine.item_id]),
        {"values": state["values"], "version": state["version"]},
    )
    assert r.status_code == 200


# ---------------------------------------------------------------- query counts


def _count(django_assert_max_num_queries, client, url, n):
    with django_assert_max_num_queries(n):
        r = client.get(url)
    assert r.status_code == 200
    return r


def test_workspace_queries_do_not_grow_with_project_size(
    project, items, ann_a, client_for, tmp_path, django_assert_num_queries
):
    from projects.factories import items_create

    items_open(items)
    candidates_create(items[0], CANDIDATE_REPLIES)
    mine = claim(ann_a, project)
    c = client_for(ann_a)
    url = reverse("annotate_item", args=[project.slug, mine.item_id])
    c.get(url)  # first opening records opened_at
    # user, project+roles, preference, annotation+item+assignment, candidates, OCR boxes (the
    # session comes from the cache)
    with django_assert_num_queries(6):
        assert c.get(url).status_code == 200
    items_open(items_create(project, tmp_path / "more", 30, start=100))
    with django_assert_num_queries(6):
        assert c.get(url).status_code == 200


def test_list_pages_have_constant_queries(project, items, ann_a, client_for, tmp_path, django_assert_num_queries):
    from projects.factories import items_create

    items_open(items)
    c = client_for(ann_a)
    home = reverse("annotate_home", args=[project.slug])
    progress = reverse("annotate_progress", args=[project.slug])
    # user, project+roles, preference, worklist, 2 progress queries (the session: cached)
    with django_assert_num_queries(6):
        assert c.get(home).status_code == 200
    for _ in range(3):
        a = claim(ann_a, project)
        annotation_submit(annotator=ann_a, item=a.item, values=MEME3W_HARMFUL, version=0)
    items_open(items_create(project, tmp_path / "more", 20, start=100))
    with django_assert_num_queries(6):
        r = c.get(home)
    assert r.content.count(b"submitted (revisable)") == 3
    with django_assert_num_queries(4):
        assert c.get(progress).status_code == 200
