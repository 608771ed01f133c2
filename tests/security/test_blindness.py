"""Blindness (issue item 1): nothing derived from another annotator reaches an annotator.

Two kinds of test, both on the raw response bytes:

* a **differential** test: two items that an annotator treats identically, where only the
  *other* annotator's values differ, so that one item becomes gold and the other goes to
  adjudication. Everything the annotators receive about the two items (submit, draft, skip,
  state, next responses, the workspace and home pages) must be the same once item-specific
  ids, texts and timestamps are masked. It caught ``"routed": "gold"`` /
  ``"routed": "adjudication"`` in the second annotator's submit response.
* a **crawl** (``test_crawl_*``): starting from the annotator's and the auditor's home pages,
  every same-origin link, form action, htmx URL and JSON endpoint reachable by GET is fetched,
  and no byte may contain model identities, the other annotator's username or values, gold
  values or routing outcomes.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import deque
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from django.test import Client
from django.urls import reverse

from annotation.factories import MEME3W_HARMFUL, items_open, ready
from projects.models import Stage

from .world import OTHER_ANNOTATOR_ENTITY, SECRETS

pytestmark = pytest.mark.django_db

#: Words that name where an item went after its N-th submission. The annotator-facing JSON
#: responses must not contain them at all (they carry only the caller's own annotation).
ROUTING_WORDS = [b'"routed"', b"routed_to", b'"gold"', b'"adjudication"', b"stage"]


def login(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def post_json(c: Client, url: str, data: dict):
    return c.post(url, data=json.dumps(data), content_type="application/json")


def _normalized(raw: bytes, item, own: tuple[str, ...]) -> list[str]:
    """Tokens of a response with the item's own text, the caller's own values and timestamps masked."""
    text = raw.decode().replace(item.text, "<item text>")
    for s in own:
        text = text.replace(s, "<own value>")
    text = re.sub(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)?", "<time>", text)
    text = re.sub(r"\b[A-Za-z0-9]{64}\b", "<csrf token>", text)  # masked CSRF tokens are rotated per response
    return re.findall(r"\d+|\w+|\s+|.", text)


def differences(raw0: bytes, raw1: bytes, *, items, own: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """What differs between the responses about item 0 and item 1, other than the item's id
    (where one says item 0's id the other must say item 1's), its text and timestamps."""
    t0, t1 = _normalized(raw0, items[0], own), _normalized(raw1, items[1], own)
    out = []
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(None, t0, t1, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        chunk0, chunk1 = "".join(t0[a1:a2]), "".join(t1[b1:b2])
        if (chunk0, chunk1) != (str(items[0].pk), str(items[1].pk)):
            out.append((chunk0, chunk1))
    return out


def test_second_submit_and_every_later_response_are_the_same_for_gold_and_adjudication(
    project, items, annotator_a, annotator_b
):
    """Catches the ``routed`` field (issue item 1): the N-th annotator's submit response said
    whether the other annotation matched theirs. Only the other annotator's values differ
    between item 0 (identical -> gold) and item 1 (other entity -> adjudication)."""
    i0, i1 = items[0], items[1]
    items_open([i0, i1])
    ready(annotator_a, project)
    ready(annotator_b, project)
    a, b = login(annotator_a), login(annotator_b)
    slug = project.slug
    theirs = {**MEME3W_HARMFUL, "target_entity": OTHER_ANNOTATOR_ENTITY}
    second_submits, a_before, a_after = {}, {}, {}
    for item, b_values in ((i0, MEME3W_HARMFUL), (i1, theirs)):
        for user_client, values in ((a, MEME3W_HARMFUL), (b, b_values)):
            r = user_client.post(reverse("api_annotate_next", args=[slug]))
            assert r.status_code == 200 and r.json()["item_id"] == item.pk, r.content
            r = post_json(
                user_client, reverse("api_annotate_submit", args=[slug, item.pk]), {"values": values, "version": 0}
            )
            assert r.status_code == 200, r.content
            progress = a.get(reverse("annotate_progress", args=[slug])).content
            (a_before if user_client is a else a_after)[item.pk] = progress
        second_submits[item.pk] = r
    i0.refresh_from_db()
    i1.refresh_from_db()
    assert (i0.stage, i1.stage) == (Stage.GOLD, Stage.ADJUDICATION)  # the two outcomes did happen

    # 1. The second annotator's submit response: only their own annotation, same for both outcomes.
    bodies = [second_submits[i.pk].json() for i in (i0, i1)]
    for body, raw in zip(bodies, (second_submits[i0.pk].content, second_submits[i1.pk].content), strict=True):
        assert set(body) == {"version", "status", "holds_slot", "saved_at"}, body
        for word in ROUTING_WORDS:
            assert word not in raw, (word, raw)
    del bodies[0]["saved_at"], bodies[1]["saved_at"]
    assert bodies[0] == bodies[1]

    # 2. Everything both annotators can fetch about the two items afterwards.
    def views(c: Client, item) -> dict[str, bytes]:
        def url(name: str) -> str:
            return reverse(name, args=[slug, item.pk])

        return {
            "state": c.get(url("api_annotate_state")).content,
            "draft": post_json(c, url("api_annotate_draft"), {"values": {}, "version": 1}).content,
            "submit": post_json(c, url("api_annotate_submit"), {"values": MEME3W_HARMFUL, "version": 1}).content,
            "skip": post_json(c, url("api_annotate_skip"), {"reason": "unclear_category"}).content,
            "page": c.get(url("annotate_item")).content,
        }

    for who, c, own in (("first", a, ()), ("second", b, (OTHER_ANNOTATOR_ENTITY, "people from Planet Zorg"))):
        v0, v1 = views(c, i0), views(c, i1)
        for name in v0:
            for raw in (v0[name], v1[name]):
                if name != "page":  # JSON: not even the words
                    for word in ROUTING_WORDS:
                        assert word not in raw, (who, name, word, raw)
            diff = differences(v0[name], v1[name], items=[i0, i1], own=own)
            assert not diff, f"{who} annotator's {name} response differs between a gold and an adjudicated item: {diff}"

    # 3. Home, progress and "next" of the first annotator: no count or trace of the other's work.
    for c in (a, b):
        for url in (reverse("annotate_home", args=[slug]), reverse("annotate_progress", args=[slug])):
            raw = c.get(url).content
            assert OTHER_ANNOTATOR_ENTITY.encode() not in raw
            assert b"annotator_b" not in raw or c is b
    # The first annotator's progress did not move when the other annotator submitted their item.
    for item in (i0, i1):
        assert _normalized(a_before[item.pk], item, ()) == _normalized(a_after[item.pk], item, ()), (
            "the first annotator's progress counts the other's submission"
        )
    nxt = a.post(reverse("api_annotate_next", args=[slug])).content
    for word in ROUTING_WORDS:
        assert word not in nxt


# --------------------------------------------------------------------------- crawl


class _Links(HTMLParser):
    """Every URL a page can make the browser fetch or navigate to by GET."""

    ATTRS = frozenset({"href", "src", "action", "hx-get", "data-url", "data-src", "formaction"})

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        posts = tag == "form" and (attrs.get("method") or "get").lower() == "post"
        for name, value in attrs.items():
            if not value or (posts and name == "action"):
                continue  # a POST form is not fetched by GET
            if name in self.ATTRS or name.startswith("data-") and value.startswith("/"):
                self.urls.append(value)


def _json_urls(obj) -> list[str]:
    found = []
    if isinstance(obj, dict):
        for v in obj.values():
            found += _json_urls(v)
    elif isinstance(obj, list):
        for v in obj:
            found += _json_urls(v)
    elif isinstance(obj, str) and obj.startswith("/"):
        found.append(obj)
    return found


#: JSON endpoints the workspace script calls for an item page (static/annotation/workspace.js);
#: they are not links in the HTML, so the crawl adds them for every workspace page it finds.
WORKSPACE_JSON = {
    "annotate_item": ["api_annotate_state", "api_item_candidates"],
    "audit_item": ["api_audit_state"],
}


def crawl(client: Client, start: list[str], *, limit: int = 400) -> dict[str, bytes]:
    """Breadth-first GET of every same-origin URL reachable from ``start``."""
    from django.urls import Resolver404, resolve

    seen: dict[str, bytes] = {}
    queue = deque(start)
    while queue and len(seen) < limit:
        url = queue.popleft()
        parts = urlsplit(url)
        if parts.scheme or parts.netloc or not parts.path.startswith("/"):
            continue  # other origin (or mailto:, javascript:, #fragment)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        if path in seen or parts.path.startswith(("/accounts/logout", "/static/")):
            continue
        r = client.get(path)
        body = b"".join(r.streaming_content) if r.streaming else r.content
        seen[path] = body
        if r.status_code in (301, 302):
            queue.append(urljoin(path, r["Location"]))
            continue
        ctype = r.get("Content-Type", "")
        found: list[str] = []
        if "html" in ctype:
            parser = _Links()
            parser.feed(body.decode("utf-8", "replace"))
            found = parser.urls
        elif "json" in ctype:
            try:
                found = _json_urls(json.loads(body))
            except ValueError:
                found = []
        try:
            match = resolve(parts.path)
        except Resolver404:
            match = None
        if match is not None and match.url_name in WORKSPACE_JSON:
            for name in WORKSPACE_JSON[match.url_name]:
                found.append(reverse(name, kwargs={k: v for k, v in match.kwargs.items() if k in ("slug", "item_id")}))
        for link in found:
            queue.append(urljoin(path, link))
    return seen


def _assert_no_leak(pages: dict[str, bytes], forbidden: list[str]) -> None:
    leaks = [(url, s) for url, body in pages.items() for s in forbidden if s.encode() in body]
    assert not leaks, f"forbidden strings reached the browser: {leaks[:10]}"


def test_crawl_as_annotator_finds_no_identity_other_values_gold_or_routing(world):
    """Every page and JSON endpoint reachable from an annotator's home page: no provider or
    model name, no other annotator's username or values, no gold value, no routing outcome."""
    user = world.users["annotator"]
    pages = crawl(login(user), ["/", reverse("annotate_home", args=[world.project.slug])])
    slug = world.project.slug
    # The crawl really reached the workspace, its JSON and the image of the held item.
    held = world.ids["item_held"]
    for must in (
        reverse("annotate_item", args=[slug, held]),
        reverse("api_annotate_state", args=[slug, held]),
        reverse("item_image", args=[slug, held]),
    ):
        assert must in pages, (must, sorted(pages))
    forbidden = SECRETS + [
        world.users["annotator_b"].username,
        world.users["reviewer"].username,
        world.users["lead"].username,
        '"routed"',
        "routed_to",
    ]
    _assert_no_leak(pages, forbidden)


def test_crawl_as_auditor_finds_no_candidates_identity_annotations_or_gold(world):
    """The auditor's blind audit: no candidate (not even anonymized), no model identity, no
    annotator's username or values, no gold value."""
    user = world.users["auditor"]
    slug = world.project.slug
    pages = crawl(login(user), ["/", reverse("audit_home", args=[slug])])
    audited = world.ids["item_audited"]
    for must in (reverse("audit_item", args=[slug, audited]), reverse("api_audit_state", args=[slug, audited])):
        assert must in pages, (must, sorted(pages))
    forbidden = SECRETS + [
        "Zorg monks",
        "Candidate A",
        world.users["annotator"].username,
        world.users["annotator_b"].username,
        world.users["reviewer"].username,
        '"routed"',
        "routed_to",
    ]
    _assert_no_leak(pages, forbidden)
