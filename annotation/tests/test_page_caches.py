"""What the cheaper request path (issue 18) must not change: what is computed once is redone
after an edit, cached sessions end at logout, and a save by item reference stays scoped."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from annotation.factories import MEME3W_HARMFUL, claim, items_open, ready
from annotation.models import Annotation, AnnotationRevision
from projects.factories import PASSWORD, items_create, project_with_members
from projects.guideline import render_markdown
from projects.members import member_deactivate, member_roles_set
from projects.services import guideline_save, project_schema_update

pytestmark = pytest.mark.django_db


def test_an_edited_guideline_shows_on_the_next_page(project, open_items, ann_a, lead, client_for):
    mine = claim(ann_a, project)
    guideline_save(project=project, text="# Rules\n\nFirst **version** of the rules.", user=lead)
    c = client_for(ann_a)
    url = reverse("annotate_item", args=[project.slug, mine.item_id])
    assert b"First <strong>version</strong>" in c.get(url).content
    assert b"First <strong>version</strong>" in c.get(url).content  # rendered once, served again
    guideline_save(project=project, text="# Rules\n\nSecond *version*: boxes are required.", user=lead)
    page = c.get(url).content
    assert b"Second <em>version</em>: boxes are required." in page
    assert b"First <strong>version</strong>" not in page


def test_rendered_guidelines_are_keyed_on_their_text():
    first = render_markdown("Use **bold**.")
    assert render_markdown("Use **bold**.") is first
    assert "<em>" in render_markdown("Use *em*.")
    assert "&lt;script&gt;" in render_markdown("<script>alert(1)</script>")


def test_a_logged_out_session_cookie_is_refused(project, open_items, ann_a, client):
    assert client.login(username=ann_a.username, password=PASSWORD)
    home = reverse("annotate_home", args=[project.slug])
    assert client.get(home).status_code == 200  # the session is now in the cache too
    cookie = client.cookies["sessionid"].value
    client.post(reverse("logout"))
    client.cookies["sessionid"] = cookie
    r = client.get(home)
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]


def _post(c, url, body):
    return c.post(url, data=json.dumps(body), content_type="application/json")


def test_a_save_cannot_reach_an_item_of_another_project_through_this_one(
    project, open_items, ann_a, tmp_path, client_for
):
    other = project_with_members("p2", annotator=[ann_a])
    ready(ann_a, other)
    theirs = items_create(other, tmp_path / "other", 2)
    items_open(theirs)
    held = claim(ann_a, other)  # ann_a holds an item of p2 and is an annotator of p1 as well
    c = client_for(ann_a)
    for name in ("api_annotate_draft", "api_annotate_submit"):
        r = _post(c, reverse(name, args=[project.slug, held.item_id]), {"values": MEME3W_HARMFUL, "version": 0})
        assert r.status_code == 404, (name, r.content)
    held.refresh_from_db()
    assert held.version == 0 and held.status == Annotation.Status.DRAFT
    assert not AnnotationRevision.objects.filter(annotation=held).exists()
    # Through its own project the same save goes through.
    r = _post(c, reverse("api_annotate_draft", args=[other.slug, held.item_id]), {"values": {}, "version": 0})
    assert r.status_code == 200, r.content


def test_a_missing_item_and_another_annotators_item_answer_alike(project, open_items, ann_a, ann_b, client_for):
    theirs = claim(ann_b, project)
    c = client_for(ann_a)
    bodies = []
    for item_id in (theirs.item_id, 99999999):
        r = _post(c, reverse("api_annotate_draft", args=[project.slug, item_id]), {"values": {}, "version": 0})
        assert r.status_code == 404
        bodies.append(r.json())
    assert bodies[0] == bodies[1]


def test_a_bad_body_for_an_item_not_held_is_still_404(project, open_items, ann_a, ann_b, client_for):
    theirs = claim(ann_b, project)
    c = client_for(ann_a)
    for name in ("api_annotate_draft", "api_annotate_submit"):
        r = _post(c, reverse(name, args=[project.slug, theirs.item_id]), {"values": {}})  # no version
        assert r.status_code == 404, name
    mine = claim(ann_a, project)
    r = _post(c, reverse("api_annotate_draft", args=[project.slug, mine.item_id]), {"values": {}})
    assert r.status_code == 400 and "version" in r.json()["errors"]


def _page(c, project, item_id) -> str:
    return c.get(reverse("annotate_item", args=[project.slug, item_id])).content.decode()


def test_a_schema_edited_in_place_shows_on_the_next_page(project, open_items, ann_a, client_for):
    """The rendered field widgets are kept per process (annotation.views.field_html): an edit
    that keeps the schema version (in place, before any annotation counts) is still seen."""
    mine = claim(ann_a, project)
    c = client_for(ann_a)
    page = _page(c, project, mine.item_id)
    assert "Harmfulness" in page and 'value="non-harmful"' in page
    project.refresh_from_db()
    schema = json.loads(json.dumps(project.schema))
    label = next(s for s in schema["fields"] if s["name"] == "label")
    label["label"], label["help"] = "Is it harmful?", "Read the guideline's section 2."
    label["choices"] = ["harmful", "not harmful"]
    version = project.schema_version
    project_schema_update(project=project, schema=schema, in_place=True)
    project.refresh_from_db()
    assert project.schema_version == version
    page = _page(c, project, mine.item_id)
    assert "Is it harmful?" in page and "Harmfulness" not in page
    assert "Read the guideline&#x27;s section 2." in page
    assert 'value="not harmful"' in page and 'value="non-harmful"' not in page


def test_each_annotator_sees_their_own_values_checked(project, open_items, ann_a, ann_b, client_for):
    """Kept widgets are keyed on the value: one annotator's choice never shows on another's page."""
    mine = claim(ann_a, project)
    theirs = claim(ann_b, project)
    c = client_for(ann_b)
    fresh = _page(c, project, theirs.item_id)
    assert 'value="harmful" checked' not in fresh and 'value="non-harmful" checked' not in fresh
    c = client_for(ann_a)
    r = _post(
        c, reverse("api_annotate_draft", args=[project.slug, mine.item_id]), {"values": MEME3W_HARMFUL, "version": 0}
    )
    assert r.status_code == 200, r.content
    page = _page(c, project, mine.item_id)
    assert 'value="harmful" checked' in page and 'value="group background" checked' in page
    values = {**MEME3W_HARMFUL, "label": "non-harmful", "target_category": None, "target_entity": None}
    r = _post(c, reverse("api_annotate_draft", args=[project.slug, mine.item_id]), {"values": values, "version": 1})
    assert r.status_code == 200, r.content
    page = _page(c, project, mine.item_id)
    assert 'value="non-harmful" checked' in page and 'value="harmful" checked' not in page
    c = client_for(ann_b)
    again = _page(c, project, theirs.item_id)
    assert 'value="non-harmful" checked' not in again and 'value="harmful" checked' not in again


def test_a_role_change_and_a_deactivation_count_on_the_next_request(project, open_items, ann_a, lead, client_for):
    """The project and the caller's roles are read per request (projects.access, hand-written SQL):
    nothing of them is kept between requests."""
    mine = claim(ann_a, project)
    c = client_for(ann_a)
    url = reverse("annotate_item", args=[project.slug, mine.item_id])
    assert c.get(url).status_code == 200
    member_roles_set(project=project, user=ann_a, roles=["reviewer"])
    assert c.get(url).status_code == 403
    member_roles_set(project=project, user=ann_a, roles=["annotator"])
    assert c.get(url).status_code == 200
    member_deactivate(project=project, user=ann_a)
    assert c.get(url).status_code == 404
    assert c.get(reverse("annotate_item", args=["no-such-project", mine.item_id])).status_code == 404


def test_the_project_read_by_hand_written_sql_equals_the_orm_one(project, ann_a):
    """projects.access builds the Project from its own row (core.rows): every field as the ORM
    reads it, JSON and time zones included."""
    from projects.access import project_get_for_user
    from projects.models import Project

    mine = project_get_for_user(user=ann_a, slug=project.slug)
    orm = Project.objects.get(pk=project.pk)
    for f in Project._meta.concrete_fields:
        assert getattr(mine, f.attname) == getattr(orm, f.attname), f.name
    assert mine.user_roles == {"annotator"}
    assert mine._state.adding is False and mine._state.db == orm._state.db


def test_the_hand_written_save_reads_equal_the_orm_ones(project, open_items, ann_a, ann_b):
    """annotation.services reads the locked item and its annotations by hand-written SQL
    (core.rows): the same instances as the ORM's, an annotation without an assignment included."""
    from django.db import transaction

    from annotation.models import Assignment, assignment_of
    from annotation.services.claims import _lock_item
    from annotation.services.saves import _annotations_with_assignment

    mine = claim(ann_a, project)
    claim(ann_b, project)
    with transaction.atomic():
        item = _lock_item(mine.item_id, project_id=project.pk)
        assert _lock_item(mine.item_id, project_id=project.pk + 1000) is None
    orm = type(item).objects.select_related("project").get(pk=mine.item_id)
    for f in type(item)._meta.concrete_fields:
        assert getattr(item, f.attname) == getattr(orm, f.attname), f.name
    assert item.project.schema == orm.project.schema and item.project.pk == project.pk
    Assignment.objects.filter(annotation=mine).delete()
    got = {a.pk: a for a in _annotations_with_assignment(item_id=mine.item_id, kind="annotation", stage=0)}
    want = Annotation.objects.filter(item_id=mine.item_id, kind="annotation", stage=0).select_related("assignment")
    assert set(got) == {a.pk for a in want}
    for a in want:
        for f in Annotation._meta.concrete_fields:
            assert getattr(got[a.pk], f.attname) == getattr(a, f.attname), f.name
        theirs, ours = assignment_of(a), assignment_of(got[a.pk])
        assert (theirs and theirs.pk, theirs and theirs.expires_at) == (ours and ours.pk, ours and ours.expires_at)
    assert assignment_of(got[mine.pk]) is None


def test_the_hand_written_claim_reads_equal_the_orm_ones(project, open_items, ann_a, ann_b, ann_c):
    """The claim's candidate list and slot rows (annotation.services.claims, core.rows) give what
    their ORM forms gave: items others started with a free slot, most held first, never the
    caller's own or one already tried; expired claims do not count as held."""
    from datetime import timedelta

    from django.db.models import Count, Q
    from django.utils import timezone

    from annotation.models import Assignment, Kind
    from annotation.services.claims import _item_rows, _partial_query
    from projects.models import Stage

    first = claim(ann_b, project)
    claim(ann_c, project)  # joins ann_b's item: most held first
    other = claim(ann_c, project)
    Assignment.objects.filter(annotation=other).update(expires_at=timezone.now() - timedelta(minutes=1))
    stage = project.get_workflow().stage(0)
    now = timezone.now()

    def orm(annotator, tried):
        live = Q(status=Assignment.Status.SUBMITTED) | Q(status=Assignment.Status.ACTIVE, expires_at__gt=now)
        return list(
            Assignment.objects.filter(
                project=project, kind=Kind.ANNOTATION, stage=0, item__stage=Stage.ANNOTATING, item__workflow_stage=0
            )
            .exclude(item_id__in=Annotation.objects.filter(annotator=annotator, kind="annotation").values("item_id"))
            .exclude(item_id__in=tried)
            .values("item_id")
            .annotate(held=Count("id", filter=live))
            .filter(held__lt=stage.annotators_range()[1])
            .order_by("-held", "item_id")
            .values_list("item_id", flat=True)[:20]
        )

    assert orm(ann_a, set()) == [other.item_id]  # ann_b's item is full; ann_c's expired claim is free
    for annotator, tried in ((ann_a, set()), (ann_a, {first.item_id}), (ann_b, set()), (ann_c, set())):
        qs = _partial_query(project=project, annotator=annotator, now=now, tried=tried, skip_locked=True, stage=stage)
        got = [] if qs is None else list(qs.values_list("pk", flat=True))
        assert got == orm(annotator, tried), (annotator.username, tried)
    want = list(
        Annotation.objects.filter(item_id=other.item_id, kind="annotation", stage=0).values_list(
            "annotator_id", "status", "assignment__status", "assignment__expires_at"
        )
    )
    assert sorted(_item_rows(item_id=other.item_id, kind="annotation", stage=0)) == sorted(want)
