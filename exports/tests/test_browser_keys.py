"""Near-duplicate review on the keyboard in Chromium: S same, D different, U undo, J/K to move,
60 pairs judged in a row (the rate is printed: a figure, not a timed assertion)."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from exports.models import NearDuplicatePair
from exports.services import near_duplicates_detect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def sixty_pairs(project, tmp_path):
    """20 pictures, each with a recompressed and a resized copy: 3 near-duplicate pairs each."""
    from exports.factories import items_import, recompressed
    from projects.factories import image_bytes

    rows = []
    for i in range(20):
        base = image_bytes(100 + i)
        rows += [
            {"source_id": f"g{i}a", "data": base, "text": f"Zorg meme {i}"},
            {"source_id": f"g{i}b", "data": recompressed(base), "text": f"Zorg meme {i}"},
            {"source_id": f"g{i}c", "data": recompressed(base, scale=0.6), "text": f"Zorg meme {i}, other caption"},
        ]
    items_import(project, tmp_path / "sixty", rows)
    near_duplicates_detect(project=project)
    assert NearDuplicatePair.objects.filter(project=project).count() >= 50
    return project


def test_pairs_are_judged_with_keys_and_undone(page, browser_login, live_server, sixty_pairs, reviewer):
    project = sixty_pairs
    n = NearDuplicatePair.objects.filter(project=project).count()
    browser_login(reviewer)
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"{live_server.url}/p/{project.slug}/duplicates/")
    page.wait_for_selector("#pairs[data-ready]")
    cards = page.locator(".nd-pair")
    expect(cards).to_have_count(n)
    first = cards.first
    # Side by side with the distance and a difference tile.
    expect(first.locator(".nd-distance")).to_contain_text("Hamming distance")
    expect(first.locator(".nd-diff img")).to_have_count(2)
    assert first.locator(".nd-side img").first.bounding_box()["height"] <= 181  # thumbnail size
    # J/K move the focus without judging.
    page.keyboard.press("j")
    page.keyboard.press("k")
    expect(first).to_have_class("card nd-pair status-unreviewed current")
    ids = [int(cards.nth(i).get_attribute("id").removeprefix("pair-")) for i in range(n)]
    start = time.perf_counter()
    for i in range(n - 1):
        page.keyboard.press("s" if i % 2 == 0 else "d")
        page.wait_for_timeout(60)  # often faster than the server answers: judgements queue, none is lost
    # Every answer is in (the last pair's card shows its stored state), then U undoes the last
    # judgement: that pair is unreviewed again and gets the focus.
    page.wait_for_function("() => !document.querySelector('#pairs form.htmx-request')")
    page.keyboard.press("u")
    last = page.locator(f"#pair-{ids[n - 2]}")
    expect(last).to_have_attribute("data-status", "unreviewed")
    page.keyboard.press("d")
    page.wait_for_timeout(20)
    page.keyboard.press("s")  # the last pair: the page then loads the next ones (none left)
    expect(page.locator("#no-pairs")).to_be_visible(timeout=15000)
    elapsed = time.perf_counter() - start
    statuses = dict(NearDuplicatePair.objects.filter(project=project).values_list("pk", "status"))
    want = {pk: ("same" if i % 2 == 0 else "different") for i, pk in enumerate(ids[: n - 2])}
    want[ids[n - 2]] = "different"
    want[ids[n - 1]] = "same"
    assert statuses == want
    print(
        f"\nnear-duplicate review: {n} pairs judged on the keyboard in {elapsed:.1f} s "
        f"= {n / elapsed * 60:.0f} pairs per minute (150 ms between keys, server round trips included)"
    )
    assert page.console_errors == []


def test_keys_faster_than_the_server_queue_on_the_page_and_never_submit_natively(
    page, browser_login, live_server, sixty_pairs, reviewer
):
    """A judgement, its undo and a new judgement of the same pair, pressed with no pause: the
    later ones wait for each answer (and for htmx to wire the card it swaps in), so the page is
    never left by a native form submission and the pair ends in the last state asked for."""
    project = sixty_pairs
    browser_login(reviewer)
    page.goto(f"{live_server.url}/p/{project.slug}/duplicates/?status=unreviewed")
    page.wait_for_selector("#pairs[data-ready]")
    page.evaluate("() => { window.__samePage = true; }")
    first = page.locator(".nd-pair").first
    pk = int(first.get_attribute("id").removeprefix("pair-"))
    for _ in range(4):
        page.keyboard.press("s")
        page.keyboard.press("u")
        page.keyboard.press("d")
        page.keyboard.press("u")
        page.wait_for_timeout(25)  # about htmx's settle delay: the window in which a card is not wired
    page.keyboard.press("s")
    page.wait_for_function(
        "() => !document.querySelector('#pairs form.htmx-request, #pairs .htmx-added')", timeout=15000
    )
    page.wait_for_timeout(300)
    page.wait_for_function("() => !document.querySelector('#pairs form.htmx-request')", timeout=15000)
    assert page.evaluate("() => window.__samePage === true"), "the page was left by a native form submission"
    assert NearDuplicatePair.objects.get(pk=pk).status == "same"
    assert page.console_errors == []
