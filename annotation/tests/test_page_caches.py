"""What the cheaper request path (issue 18) must not change: what is computed once is redone
after an edit, and cached sessions end at logout."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.factories import claim
from projects.factories import PASSWORD
from projects.guideline import render_markdown
from projects.services import guideline_save

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
