"""The reviewer's page on the keyboard, the similarity figures, and "my decisions" with Revise."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from adjudication.models import AdjudicationTask, GoldRecord
from annotation.factories import MEME3W_HARMFUL as HARMFUL

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_reviewer_decides_with_keys_sees_similarities_and_revises(
    page, browser_login, live_server, project, one_item, annotator_a, annotator_b, reviewer, submit
):
    submit(annotator_a, project, {**HARMFUL, "target_entity": "Zorgians", "visual_region": [[100, 100, 300, 300]]})
    submit(
        annotator_b,
        project,
        {
            **HARMFUL,
            "target_category": "gender",
            "target_entity": "people from Planet Zorg",
            "visual_region": [[600, 100, 900, 400]],
        },
    )
    task = AdjudicationTask.objects.get()
    browser_login(reviewer)
    page.goto(f"{live_server.url}/p/{project.slug}/review/{task.pk}/")
    page.wait_for_selector("#review[data-ready]")
    # Per-field similarity, by the field type's measure, against the project's threshold.
    entity = page.locator('tr[data-name="target_entity"] .similarity')
    expect(entity).to_contain_text(re.compile(r"F1_rel 0\.\d\d < 0\.70"))
    expect(page.locator('tr[data-name="visual_region"] .similarity')).to_have_text("IoU 0.00 < 0.75")
    expect(page.locator('tr[data-name="target_category"] .similarity')).to_have_text("different")
    expect(page.locator('tr[data-name="label"] .similarity')).to_have_text("same")
    # The focus starts on the first field that needs a decision; 2 takes Annotator 2's value there
    # and moves on to the next undecided field.
    assert page.locator("tr.field-row.current").get_attribute("data-name") == "target_category"
    page.keyboard.press("2")
    assert page.is_checked('tr[data-name="target_category"] input[value="2"]')
    assert page.locator("tr.field-row.current").get_attribute("data-name") == "target_entity"
    page.keyboard.press("1")
    assert page.locator("tr.field-row.current").get_attribute("data-name") == "visual_region"
    # E edits the region from what was picked before (here nothing: Annotator 1's boxes).
    page.keyboard.press("e")
    expect(page.locator('tr[data-name="visual_region"] .editor')).to_be_visible()
    expect(page.locator("#box-list li")).to_have_count(1)
    page.keyboard.press("Escape")
    # B: draw mode on the gold canvas; a box drawn inside the existing one.
    page.keyboard.press("b")
    expect(page.locator("#draw-mode")).to_have_attribute("aria-pressed", "true")
    box = page.locator("#box-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.15, box["y"] + box["height"] * 0.15)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.25, box["y"] + box["height"] * 0.25, steps=5)
    page.mouse.up()
    expect(page.locator("#box-list li")).to_have_count(2)
    # Undo the drawn box, redo it.
    page.keyboard.press("Control+z")
    expect(page.locator("#box-list li")).to_have_count(1)
    page.keyboard.press("Control+Shift+z")
    expect(page.locator("#box-list li")).to_have_count(2)
    page.keyboard.press("Escape")
    # N/P move between fields; the keys dialog lists everything.
    page.keyboard.press("p")
    assert page.locator("tr.field-row.current").get_attribute("data-name") == "text_mention"
    page.keyboard.press("?")
    expect(page.locator("#keys-help")).to_be_visible()
    page.keyboard.press("Escape")
    page.fill("#note", "B's category; A's region, plus the inner box")
    page.keyboard.press("Control+Enter")
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/review/")
    gold = GoldRecord.objects.get(item=one_item)
    assert gold.values["target_category"] == "gender" and gold.values["target_entity"] == "Zorgians"
    assert len(gold.values["visual_region"]) == 2 and gold.values["visual_region"][0] == [100, 100, 300, 300]
    assert gold.provenance["visual_region"]["edited"] is True

    # My decisions: the gold, read-only, and Revise (no release yet).
    row = page.locator(f"#decision-{gold.pk}")
    expect(row).to_contain_text("gender")
    expect(row).to_contain_text("2 boxes")
    row.locator("button.revise").click()
    page.wait_for_selector("#review[data-ready]")
    expect(page.locator(".ws-head .badge")).to_have_text("revising your decision")
    # The previous decisions come back as the draft.
    assert page.is_checked('tr[data-name="target_category"] input[value="2"]')
    assert page.is_checked('tr[data-name="visual_region"] input[value="edit"]')
    expect(page.locator("#note")).to_have_value("B's category; A's region, plus the inner box")
    page.locator("tr.field-row").first.locator("th").focus()
    page.keyboard.press("n")
    page.keyboard.press("n")  # target_entity
    page.keyboard.press("2")
    page.keyboard.press("Control+Enter")
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/review/")
    current = GoldRecord.objects.get(item=one_item, is_current=True)
    assert current.revision == 2 and current.values["target_entity"] == "people from Planet Zorg"
    assert page.console_errors == []
