"""The annotation workspace driven with a mouse and a keyboard in Debian's Chromium."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotation.factories import MEME3W_HARMFUL, claim, items_open, ready
from annotation.models import Annotation
from annotation.services import annotation_save_draft
from annotation.tests.test_submit import CANDIDATE_REPLIES
from candidates.factories import candidates_create
from workflow.services import annotation_submit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECRET_ENTITY = "Xylophonic Quokka Brigade"


def open_workspace(page, live_server, project, item_id):
    page.goto(f"{live_server.url}/p/{project.slug}/annotate/{item_id}/")
    page.wait_for_selector("#workspace.ready")


def drag(page, box, start, end):
    """Drag on the image from start to end, given as fractions of its size."""
    x0, y0 = box["x"] + box["width"] * start[0], box["y"] + box["height"] * start[1]
    x1, y1 = box["x"] + box["width"] * end[0], box["y"] + box["height"] * end[1]
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, steps=4)
    page.mouse.move(x1, y1, steps=4)
    page.mouse.up()


def select_in_item_text(page, words):
    page.evaluate(
        """(words) => {
            const el = document.getElementById('item-text');
            const node = el.firstChild;
            const at = node.textContent.indexOf(words);
            const range = document.createRange();
            range.setStart(node, at);
            range.setEnd(node, at + words.length);
            const sel = document.getSelection();
            sel.removeAllRanges();
            sel.addRange(range);
        }""",
        words,
    )


# Waits go through locators: wait_for_function would need eval, which the page's CSP forbids.
def use_all(page, entity):
    """Press "Use all" of the candidate whose target entity is ``entity`` (letters are shuffled)."""
    cell = page.locator("td", has_text=entity).locator("[data-use-field=target_entity]")
    page.click(f"[data-use-all={cell.get_attribute('data-letter')}]")


def saved(page, timeout=5000):
    expect(page.locator("#save-status")).to_have_text(re.compile(r"^Saved"), timeout=timeout)


def test_annotate_with_a_candidate_boxes_and_a_mention(page, browser_login, live_server, project, items, annotator_a):
    from candidates.selectors import candidate_id_for_letter

    items_open(items[:1])
    candidates_create(items[0], CANDIDATE_REPLIES)
    browser_login(annotator_a)
    page.goto(f"{live_server.url}/p/{project.slug}/")
    page.click("text=Annotate")
    # Content warning before first use.
    page.wait_for_selector("#content-warning")
    page.click("#accept-warning")
    page.click("#next-btn")
    page.wait_for_selector("#workspace.ready")
    assert page.is_hidden("#field-target_category")  # hidden until "harmful"
    page.check("input[name=label][value=harmful]")
    assert page.is_visible("#field-target_category")
    # Take the category from the candidate that says "religion and caste".
    use = page.locator("td", has_text="religion and caste").locator("[data-use-field=target_category]")
    letter = use.get_attribute("data-letter")
    use.click()
    assert page.is_checked("input[name=target_category][value='religion and caste']")
    assert page.inner_text("[data-prov-for=target_category]") == f"from candidate {letter}"
    page.fill("input[name=target_entity]", "people from Planet Zorg")
    # Two boxes drawn with the mouse, the second one moved with the keyboard.
    image = page.locator("#box-canvas").bounding_box()
    drag(page, image, (0.1, 0.1), (0.4, 0.5))
    drag(page, image, (0.55, 0.2), (0.9, 0.8))
    assert page.locator("#box-canvas rect.box").count() == 2
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("Shift+ArrowDown")
    # The mention: selected with the mouse in the item text, copied exactly.
    words = "people from Planet Zorg"
    select_in_item_text(page, words)
    page.click("[data-span-use=text_mention]")
    assert page.input_value("input[name=text_mention]") == words
    assert page.inner_text("#item-text mark") == words
    assert page.console_errors == []
    page.click("#submit-btn")
    # "Next item after submit" is on by default: the next item, or the queue page when none is left.
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/annotate/")
    assert "No items are waiting" in page.content()

    a = Annotation.objects.get(annotator=annotator_a)
    assert a.status == "submitted"
    assert a.values["target_category"] == "religion and caste"
    assert a.values["text_mention"] == words
    boxes = a.values["visual_region"]
    assert len(boxes) == 2
    assert all(isinstance(c, int) and 0 <= c <= 1000 for b in boxes for c in b)
    first, second = sorted(boxes)
    assert first == pytest.approx([100, 100, 400, 500], abs=15)
    assert second == pytest.approx([545, 200, 895, 805], abs=15)  # moved left 5, grown down 5
    assert a.provenance["target_category"] == {
        "letter": letter,
        "edited": False,
        "candidate_id": candidate_id_for_letter(item=items[0], user=annotator_a, letter=letter),
    }
    assert "target_entity" not in a.provenance
    assert a.time_spent_ms > 0 and a.opened_at is not None
    expect(page.locator("#done-today")).to_have_text("1")


def test_use_all_then_non_harmful_clears_targets_and_boxes_keyboard(
    page, browser_login, live_server, project, items, annotator_a
):
    items_open(items[:1])
    candidates_create(items[0], CANDIDATE_REPLIES)
    ready(annotator_a, project)
    mine = claim(annotator_a, project)
    browser_login(annotator_a)
    open_workspace(page, live_server, project, mine.item_id)
    use_all(page, "people from Planet Zorg")
    assert page.input_value("input[name=target_entity]") == "people from Planet Zorg"
    assert page.locator("#box-canvas rect.box").count() == 1
    # Keyboard: Tab onto the image selects the box, Delete removes it, Add box + arrows make one.
    page.focus("#box-canvas")
    page.keyboard.press("Tab")
    assert page.locator("#box-canvas rect.box.selected").count() == 1
    page.keyboard.press("Delete")
    assert page.locator("#box-canvas rect.box").count() == 0
    page.click("#add-box")
    page.keyboard.press("ArrowRight")
    saved(page)
    assert Annotation.objects.get(pk=mine.pk).values["visual_region"] == [[405, 400, 605, 600]]
    assert Annotation.objects.get(pk=mine.pk).provenance["visual_region"]["edited"] is True
    page.check("input[name=label][value=non-harmful]")
    assert page.is_hidden("#field-target_entity")
    saved(page)
    values = Annotation.objects.get(pk=mine.pk).values
    assert values["target_entity"] is None and values["visual_region"] == [] and values["target_category"] is None
    assert page.console_errors == []


def test_draft_survives_reload_network_errors_and_session_expiry(
    page, browser_login, live_server, project, items, annotator_a
):
    items_open(items[:1])
    ready(annotator_a, project)
    mine = claim(annotator_a, project)
    browser_login(annotator_a)
    open_workspace(page, live_server, project, mine.item_id)
    page.check("input[name=label][value=harmful]")
    page.fill("input[name=target_entity]", "Zorgians")
    saved(page)
    page.reload()
    page.wait_for_selector("#workspace.ready")
    assert page.is_checked("input[name=label][value=harmful]")
    assert page.input_value("input[name=target_entity]") == "Zorgians"

    # Network error: visible "unsaved" state, retried with backoff until it goes through.
    page.route(re.compile(r".*/draft$"), lambda route: route.abort())
    page.fill("input[name=target_entity]", "Zorgian people")
    expect(page.locator("#save-status")).to_contain_text("retrying")
    assert page.is_visible("#ws-banner")
    page.unroute(re.compile(r".*/draft$"))
    saved(page, timeout=10000)
    assert Annotation.objects.get(pk=mine.pk).values["target_entity"] == "Zorgian people"

    # Session expiry: the save is refused, the message says so, the browser keeps the edit.
    page.context.clear_cookies()
    page.fill("input[name=target_entity]", "people of Zorg")
    page.wait_for_selector("#ws-banner.bad")
    assert "session has expired" in page.inner_text("#ws-banner")
    assert "kept in this browser" in page.inner_text("#ws-banner")
    assert Annotation.objects.get(pk=mine.pk).values["target_entity"] == "Zorgian people"
    page.click("#ws-banner a")  # "Log in again"
    page.fill("#id_username", annotator_a.username)
    from projects.factories import PASSWORD

    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("#workspace.ready")  # back on the item (login ?next=)
    assert "not saved to the server" in page.inner_text("#ws-banner")
    page.click("text=Restore them")
    assert page.input_value("input[name=target_entity]") == "people of Zorg"
    saved(page)
    assert Annotation.objects.get(pk=mine.pk).values["target_entity"] == "people of Zorg"


def test_second_annotator_sees_none_of_the_first_ones_values(
    page, browser_login, live_server, project, items, annotator_a, annotator_b
):
    items_open(items[:1])
    ready(annotator_a, project)
    mine = claim(annotator_a, project)
    annotation_submit(
        annotator=annotator_a, item=mine.item, version=0, values={**MEME3W_HARMFUL, "target_entity": SECRET_ENTITY}
    )
    ready(annotator_b, project)
    browser_login(annotator_b)
    page.goto(f"{live_server.url}/p/{project.slug}/annotate/")
    page.click("#next-btn")
    page.wait_for_selector("#workspace.ready")
    assert page.url.endswith(f"/annotate/{mine.item_id}/")
    assert SECRET_ENTITY not in page.content()
    assert page.input_value("input[name=target_entity]") == ""
    assert not page.is_checked("input[name=label][value=harmful]")
    assert page.locator("#box-canvas rect.box").count() == 0
    state = page.evaluate("fetch(location.pathname.replace('/p/', '/api/projects/')).then(r => r.text())")
    assert SECRET_ENTITY not in state and "annotator_a" not in state


def test_stale_submit_shows_the_409_message(page, browser_login, live_server, project, items, annotator_a):
    items_open(items[:1])
    ready(annotator_a, project)
    mine = claim(annotator_a, project)
    browser_login(annotator_a)
    open_workspace(page, live_server, project, mine.item_id)
    page.check("input[name=label][value=non-harmful]")
    saved(page)
    # Meanwhile the same annotator saves from another tab.
    current = Annotation.objects.get(pk=mine.pk)
    annotation_save_draft(annotator=annotator_a, item=mine.item, values={"label": "harmful"}, version=current.version)
    page.click("#submit-btn")
    page.wait_for_selector("#ws-banner.bad")
    assert "saved elsewhere" in page.inner_text("#ws-banner")
    assert Annotation.objects.get(pk=mine.pk).status == "draft"
    assert Annotation.objects.get(pk=mine.pk).values["label"] == "harmful"  # not overwritten


def test_validation_errors_show_beside_the_field(page, browser_login, live_server, project, items, annotator_a):
    items_open(items[:1])
    ready(annotator_a, project)
    mine = claim(annotator_a, project)
    browser_login(annotator_a)
    open_workspace(page, live_server, project, mine.item_id)
    page.check("input[name=label][value=harmful]")
    page.click("#submit-btn")
    page.wait_for_selector("[data-error-for=target_category]:not([hidden])")
    assert page.inner_text("[data-error-for=target_category]") == "is required"
    assert page.inner_text("[data-error-for=target_entity]") == "is required"
    assert Annotation.objects.get(pk=mine.pk).status == "draft"


def test_blur_until_click(page, browser_login, live_server, project, items, annotator_a):
    items_open(items[:1])
    ready(annotator_a, project)
    mine = claim(annotator_a, project)
    browser_login(annotator_a)
    open_workspace(page, live_server, project, mine.item_id)
    page.check("#blur-toggle input[name=blur_images]")
    page.wait_for_timeout(300)
    open_workspace(page, live_server, project, mine.item_id)
    assert page.locator("#stage.blurred").count() == 1
    page.click("#unblur")
    assert page.locator("#stage.blurred").count() == 0


def test_screenshot_of_the_workspace(page, browser_login, live_server, project, tmp_path, annotator_a):
    """Not an assertion on looks: leaves a screenshot for people to check the layout."""
    from projects.factories import items_create

    items = items_create(
        project,
        tmp_path / "shot",
        1,
        texts=["When the people from Planet Zorg land and immediately ask for the wifi password"],
    )
    items_open(items)
    candidates_create(items[0], CANDIDATE_REPLIES)
    ready(annotator_a, project)
    mine = claim(annotator_a, project)
    browser_login(annotator_a)
    page.set_viewport_size({"width": 1440, "height": 1000})
    open_workspace(page, live_server, project, mine.item_id)
    use_all(page, "people from Planet Zorg")
    image = page.locator("#box-canvas").bounding_box()
    drag(page, image, (0.55, 0.5), (0.85, 0.9))
    saved(page)
    import os

    page.screenshot(path=os.environ.get("CONCORD_SCREENSHOT", str(tmp_path / "annotation.png")), full_page=True)
    assert page.console_errors == []


def test_boxes_move_and_resize_with_the_mouse_also_when_zoomed(
    page, browser_login, live_server, project, items, annotator_a
):
    items_open(items[:1])
    ready(annotator_a, project)
    mine = claim(annotator_a, project)
    browser_login(annotator_a)
    open_workspace(page, live_server, project, mine.item_id)
    page.check("input[name=label][value=harmful]")
    canvas = page.locator("#box-canvas")
    image = canvas.bounding_box()
    drag(page, image, (0.2, 0.2), (0.4, 0.4))
    # Move: drag the box's body by +10% / +20%.
    drag(page, image, (0.3, 0.3), (0.4, 0.5))
    # Resize: drag its bottom-right handle (the box is selected) further out.
    drag(page, image, (0.5, 0.6), (0.7, 0.8))
    saved(page)
    (box,) = Annotation.objects.get(pk=mine.pk).values["visual_region"]
    assert box == pytest.approx([300, 400, 700, 800], abs=12)
    # Zoomed in, the same screen gesture maps to the same image coordinates.
    page.click("[data-zoom=in]")
    assert page.inner_text("#zoom-level") == "150%"
    zoomed = canvas.bounding_box()
    assert zoomed["width"] == pytest.approx(image["width"] * 1.5, rel=0.02)
    page.evaluate("document.getElementById('viewport').scrollTo(0, 0)")
    zoomed = canvas.bounding_box()
    drag(page, zoomed, (0.05, 0.05), (0.15, 0.1))
    saved(page)
    boxes = Annotation.objects.get(pk=mine.pk).values["visual_region"]
    assert len(boxes) == 2 and boxes[1] == pytest.approx([50, 50, 150, 100], abs=12)


def test_multichoice_visibility_and_exclusive_options(page, browser_login, live_server, lead, tmp_path, make_user):
    from projects.factories import items_create, project_with_members

    user = make_user("aha_annotator")
    project = project_with_members("aha", preset="aha", lead=[lead], annotator=[user])
    items_open(items_create(project, tmp_path / "aha", 1))
    ready(user, project)
    mine = claim(user, project)
    browser_login(user)
    open_workspace(page, live_server, project, mine.item_id)
    assert page.is_hidden("#field-hateful_type") and page.is_hidden("#field-non_hateful_type")
    page.check("input[name=is_hateful][value=Hateful]")
    assert page.is_visible("#field-hateful_type") and page.is_hidden("#field-non_hateful_type")
    page.check("input[name=hateful_type][value=Mocking]")
    page.check("input[name=hateful_type][value=Slurs]")
    page.check("input[name=hateful_type][value=Other]")  # exclusive: clears the others
    assert not page.is_checked("input[name=hateful_type][value=Mocking]")
    assert not page.is_checked("input[name=hateful_type][value=Slurs]")
    page.check("input[name=hateful_type][value=Contempt]")  # and another option clears "Other"
    assert not page.is_checked("input[name=hateful_type][value=Other]")
    page.check("input[name=targeted_categories][value=religion]")
    saved(page)
    values = Annotation.objects.get(pk=mine.pk).values
    assert values["hateful_type"] == ["Contempt"] and values["targeted_categories"] == ["religion"]
    page.check("input[name=is_hateful][value=Not-Hateful]")
    saved(page)
    values = Annotation.objects.get(pk=mine.pk).values
    assert values["hateful_type"] == [] and values["targeted_categories"] == []
    page.click("#submit-btn")
    page.wait_for_selector("[data-error-for=non_hateful_type]:not([hidden])")
    page.check("input[name=non_hateful_type][value=Humor]")
    page.click("#submit-btn")
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/annotate/")  # on to the next item: none left
    assert Annotation.objects.get(pk=mine.pk).values == {
        "is_hateful": "Not-Hateful",
        "hateful_type": [],
        "targeted_categories": [],
        "non_hateful_type": ["Humor"],
    }
    # The refused submit is logged by Chromium as a failed (400) resource; nothing else went wrong.
    assert [e for e in page.console_errors if "status of 400" not in e] == []
