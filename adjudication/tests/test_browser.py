from __future__ import annotations

import pytest
from playwright.sync_api import expect

from adjudication.models import AdjudicationTask, GoldRecord
from annotation.factories import MEME3W_HARMFUL as HARMFUL

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_reviewer_picks_boxes_from_one_and_category_from_the_other(
    page, browser_login, live_server, project, one_item, annotator_a, annotator_b, reviewer, submit
):
    submit(annotator_a, project, {**HARMFUL, "visual_region": [[100, 100, 300, 300], [500, 500, 700, 700]]})
    submit(annotator_b, project, {**HARMFUL, "target_category": "gender", "visual_region": [[600, 100, 900, 400]]})
    task = AdjudicationTask.objects.get()
    browser_login(reviewer)
    page.goto(f"{live_server.url}/p/{project.slug}/review/")
    page.click("#review-next")
    # The page script marks the root once it has set everything up (module scripts run late).
    page.wait_for_selector("#review[data-ready]")
    # Both annotators' boxes are overlaid, each in its own layer, and can be hidden.
    expect(page.locator("svg.overlay.a1 rect")).to_have_count(2)
    expect(page.locator("svg.overlay.a2 rect")).to_have_count(1)
    page.uncheck('.overlay-toggle[data-k="1"]')
    assert "hidden" in page.get_attribute("svg.overlay.a1", "class")
    page.check('.overlay-toggle[data-k="1"]')
    # Mentions of both annotators are highlighted in the text.
    assert page.locator("#item-text mark.m1.m2").count() == 1
    # Trying to save without deciding the disagreeing fields names them.
    page.click("#save-gold")
    assert "needs a decision" in page.inner_text("#form-error")
    page.check('tr[data-name="target_category"] input[value="2"]')
    page.check('tr[data-name="visual_region"] input[value="1"]')
    # The gold layer shows the chosen annotator's boxes.
    expect(page.locator("#box-canvas rect.box")).to_have_count(2)
    page.fill("#note", "A's boxes cover both people; B's category fits the caption")
    page.click("#save-gold")
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/review/")
    gold = GoldRecord.objects.get(item=one_item)
    assert gold.values["target_category"] == "gender"
    assert gold.values["visual_region"] == [[100, 100, 300, 300], [500, 500, 700, 700]]
    assert gold.provenance["target_category"] == {"source": "reviewer", "from_annotator": 2, "decided_by": reviewer.pk}
    assert gold.provenance["visual_region"]["from_annotator"] == 1
    assert gold.provenance["label"] == {"source": "identical"}
    assert gold.note.startswith("A's boxes")
    assert page.console_errors == []
    # An annotator of the item, even with the reviewer role, cannot open it.
    from projects.services import membership_add

    membership_add(project=project, user=annotator_a, role="reviewer")
    ctx = page.context.browser.new_context()
    other = ctx.new_page()
    browser_login(annotator_a, pg=other)
    response = other.goto(f"{live_server.url}/p/{project.slug}/review/{task.pk}/")
    assert response.status == 403
    ctx.close()


def test_reviewer_edits_boxes_by_drawing_and_the_draft_survives_reload(
    page, browser_login, live_server, project, one_item, annotator_a, annotator_b, reviewer, submit
):
    submit(annotator_a, project, HARMFUL)
    submit(annotator_b, project, {**HARMFUL, "target_category": "gender", "visual_region": []})
    task = AdjudicationTask.objects.get()
    browser_login(reviewer)
    page.goto(f"{live_server.url}/p/{project.slug}/review/{task.pk}/")
    page.wait_for_selector("#review[data-ready]")
    page.check('tr[data-name="target_category"] input[value="1"]')
    page.check('tr[data-name="visual_region"] input[value="edit"]')
    box = page.locator("#box-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.1, box["y"] + box["height"] * 0.1)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.6, steps=5)
    page.mouse.up()
    expect(page.locator("#save-status")).to_have_text("Draft saved")
    page.reload()
    page.wait_for_selector("#review[data-ready]")
    assert page.is_checked('tr[data-name="target_category"] input[value="1"]')
    assert page.is_checked('tr[data-name="visual_region"] input[value="edit"]')
    page.screenshot(path="/tmp/review.png", full_page=True)
    page.click("#save-gold")
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/review/")
    region = GoldRecord.objects.get(item=one_item).values["visual_region"]
    assert len(region) == 2  # A's box + the drawn one (editing starts from Annotator 1's value)
    x1, y1, x2, y2 = region[-1]
    assert abs(x1 - 100) <= 15 and abs(y1 - 100) <= 15 and abs(x2 - 500) <= 15 and abs(y2 - 600) <= 15
