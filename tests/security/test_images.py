"""Images obey role and licence on every path (issue item 2).

Rule (exports/image_access.py): leads get every image of their project; annotators and
auditors the images of items they hold or held; reviewers of items they review or reviewed
(adjudication tasks, near-duplicate pairs); researchers only what a published release
includes (redistributable items, as shipped under the release's images/). Members refused
get 403, non-members 404, anonymous users the login page.

These tests caught: a researcher fetching a non-redistributable item's image (200 image/jpeg)
and an annotator fetching any image of the project, e.g. of an item never in their queue.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from exports.image_access import released_image_name

from .world import World

pytestmark = pytest.mark.django_db

OK, REFUSED, HIDDEN = 200, 403, 404

#: persona -> world item key -> expected status. g0: gold, redistributable, released, audited,
#: in a near-duplicate pair with n0; g1: gold, NOT redistributable, released (as a reference
#: only), audited; d0: decided by the reviewer, redistributable, released; d1: open adjudication
#: task nobody claimed; h0: held by the annotator (draft), redistributable, never released;
#: f0: never claimed, not redistributable; n0: near-duplicate of g0, never annotated.
EXPECTED: dict[str, dict[str, int]] = {
    "lead": {"g0": OK, "g1": OK, "d0": OK, "d1": OK, "h0": OK, "f0": OK, "n0": OK},
    "annotator": {"g0": OK, "g1": OK, "d0": OK, "d1": OK, "h0": OK, "f0": REFUSED, "n0": REFUSED},
    "auditor": {"g0": OK, "g1": OK, "d0": OK, "d1": REFUSED, "h0": REFUSED, "f0": REFUSED, "n0": REFUSED},
    "reviewer": {"g0": OK, "g1": REFUSED, "d0": OK, "d1": REFUSED, "h0": REFUSED, "f0": REFUSED, "n0": OK},
    "researcher": {"g0": OK, "g1": REFUSED, "d0": OK, "d1": REFUSED, "h0": REFUSED, "f0": REFUSED, "n0": REFUSED},
}


def image_url(world: World, key: str) -> str:
    return reverse("item_image", args=[world.project.slug, world.items[key].pk])


def login(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


@pytest.mark.parametrize("persona", sorted(EXPECTED))
def test_item_image_follows_role_and_licence(world, persona):
    """Each role x item relation x licence value (g0/d0/h0 redistributable, g1/f0/n0 not)."""
    c = login(world.users[persona])
    got = {key: c.get(image_url(world, key)).status_code for key in EXPECTED[persona]}
    assert got == EXPECTED[persona]
    ok = c.get(image_url(world, next(k for k, v in EXPECTED[persona].items() if v == OK)))
    assert ok["Content-Type"].startswith("image/") and ok["X-Content-Type-Options"] == "nosniff"


def test_licence_alone_decides_for_researchers(world):
    """Both licence values on otherwise identical released gold items: only the redistributable one."""
    g0, g1 = world.items["g0"], world.items["g1"]
    assert (g0.redistributable, g1.redistributable) == (True, False)
    c = login(world.users["researcher"])
    assert c.get(image_url(world, "g0")).status_code == OK
    r = c.get(image_url(world, "g1"))
    assert r.status_code == REFUSED and not r["Content-Type"].startswith("image/")

    # The release's own files say the same: g0's image is shipped, g1's only referenced.
    def release_file(item) -> str:
        return reverse("api_release_file", args=[world.project.slug, world.ids["release"], released_image_name(item)])

    assert c.get(release_file(g0)).status_code == OK
    assert c.get(release_file(g1)).status_code == HIDDEN


def test_outsiders_and_anonymous_get_no_image(world, foreign):
    for key in ("g0", "h0"):
        assert login(foreign.users["lead"]).get(image_url(world, key)).status_code == HIDDEN
        r = Client().get(image_url(world, key))
        assert r.status_code == 302 and "/accounts/login/" in r["Location"]
    # Another project's item id under this project's slug does not resolve.
    lead = login(world.users["lead"])
    assert lead.get(reverse("item_image", args=[world.project.slug, foreign.items["g0"].pk])).status_code == HIDDEN


def test_a_reviewer_sees_the_image_of_a_task_once_it_is_theirs(world):
    """The review page claims the task, then its image is the reviewer's to see."""
    c = login(world.users["reviewer"])
    assert c.get(image_url(world, "d1")).status_code == REFUSED
    page = c.get(reverse("review_task", args=[world.project.slug, world.ids["task_open"]]))
    assert page.status_code == 200 and image_url(world, "d1").encode() in page.content
    assert c.get(image_url(world, "d1")).status_code == OK


def test_every_image_a_page_shows_is_fetchable_by_who_sees_the_page(world):
    """The rule must not break the pages that embed images: duplicates review (lead, reviewer),
    the annotation and audit workspaces, the lead's item history and candidates pages."""
    import re

    slug = world.project.slug
    pages = {
        "lead": [
            reverse("duplicates_page", args=[slug]),
            reverse("item_history", args=[slug, world.items["g1"].pk]),
            reverse("candidate_item", args=[slug, world.items["h0"].pk]),
        ],
        "reviewer": [reverse("duplicates_page", args=[slug])],
        "annotator": [reverse("annotate_item", args=[slug, world.items["h0"].pk])],
        "auditor": [reverse("audit_item", args=[slug, world.items["g1"].pk])],
    }
    for persona, urls in pages.items():
        c = login(world.users[persona])
        for url in urls:
            page = c.get(url)
            assert page.status_code == 200, (persona, url)
            images = set(re.findall(rf'src="(/p/{slug}/items/\d+/image)"', page.content.decode()))
            assert images, (persona, url)
            for src in images:
                assert c.get(src).status_code == OK, (persona, url, src)
