"""The two structured field types end to end in Chromium: checklists with links between them
(MemeBench VIKR: Identity items name the Visual item they identify) and lists of pairs (MemeCap
visual metaphors), in the annotation workspace and the reviewer's "Edit" cell."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from adjudication.models import AdjudicationTask, GoldRecord
from annotation.factories import claim, items_open, ready
from annotation.models import Annotation
from workflow.services import annotation_submit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STRUCTURED_SCHEMA = {
    "fields": [
        {"name": "visual", "type": "checklist", "label": "Visual", "id_prefix": "V", "max_items": 4},
        {
            "name": "identity",
            "type": "checklist",
            "label": "Identity",
            "id_prefix": "I",
            "link_to": "visual",
            "link_required": True,
        },
        {"name": "metaphors", "type": "pairlist", "label": "Visual metaphors"},
    ]
}


@pytest.fixture
def structured(project, tmp_path):
    from projects.factories import items_create
    from projects.services import project_schema_update

    project = project_schema_update(project=project, schema=STRUCTURED_SCHEMA)
    items = items_create(project, tmp_path / "vikr", 1, texts=["When the people from Planet Zorg ask for wifi first"])
    items_open(items)
    return project


def saved(page, timeout=5000):
    expect(page.locator("#save-status")).to_have_text(re.compile(r"^Saved"), timeout=timeout)


def input_values(locator):
    return [locator.nth(i).input_value() for i in range(locator.count())]


def add_item(page, field, text):
    page.click(f"#field-{field} [data-row-add]")
    # The new row's text input has the focus: typing goes there.
    page.keyboard.type(text)


def test_checklists_with_links_and_pairs_in_the_workspace_and_the_reviewer_page(
    page, browser_login, live_server, structured, annotator_a, annotator_b, reviewer
):
    project = structured
    ready(annotator_a, project)
    mine = claim(annotator_a, project)
    browser_login(annotator_a)
    page.goto(f"{live_server.url}/p/{project.slug}/annotate/{mine.item_id}/")
    page.wait_for_selector("#workspace.ready")

    add_item(page, "visual", "a spaceship lands")
    add_item(page, "visual", "a wifi router")
    add_item(page, "visual", "a man in a suit")
    # Ids are assigned: V1, V2, V3, shown in each row.
    expect(page.locator("#field-visual .row-id")).to_have_text(["V1", "V2", "V3"])
    add_item(page, "identity", "the man is a Zorgian")
    # The link menu lists the visual items as they are now.
    link = page.locator("#field-identity .cl-row").nth(0).locator("select.row-link")
    expect(link.locator("option")).to_have_text(
        ["— choose —", "V1: a spaceship lands", "V2: a wifi router", "V3: a man in a suit"]
    )
    link.select_option("V3")
    add_item(page, "identity", "the router speaks Zorgian")
    page.locator("#field-identity .cl-row").nth(1).locator("select.row-link").select_option("V2")
    # A pair: one input per part, named by the part.
    page.click("#field-metaphors [data-row-add]")
    page.get_by_label("Pair 1 vehicle").fill("spaceship")
    page.get_by_label("Pair 1 meaning").fill("newcomers")
    page.click("#field-metaphors [data-row-add]")  # an empty row left behind is dropped
    saved(page)

    # Removing the router leaves I2 pointing at an item that is gone: marked, then refused on submit.
    page.get_by_label("Remove item V2").click()
    expect(page.locator("#field-visual .row-id")).to_have_text(["V1", "V3"])
    stale = page.locator("#field-identity .cl-row").nth(1).locator("select.row-link")
    expect(stale).to_have_value("V2")
    expect(stale.locator("option:checked")).to_have_text("V2 (removed)")
    assert "stale-link" in stale.get_attribute("class")
    page.click("#submit-btn")
    error = page.locator("[data-error-for=identity]")
    expect(error).to_be_visible()
    expect(error).to_contain_text("I2 links to 'V2', which is not an item of visual")
    assert Annotation.objects.get(pk=mine.pk).status == "draft"

    # A new visual item gets a new id (V4, never V2 again), and I2 is linked to it.
    add_item(page, "visual", "a router with antennas")
    expect(page.locator("#field-visual .row-id")).to_have_text(["V1", "V3", "V4"])
    stale.select_option("V4")
    expect(error).to_be_hidden()
    saved(page)

    # The draft survives a reload: rows, ids, links and pairs come back.
    page.reload()
    page.wait_for_selector("#workspace.ready")
    assert input_values(page.locator("#field-visual .row-text")) == [
        "a spaceship lands",
        "a man in a suit",
        "a router with antennas",
    ]
    assert input_values(page.locator("#field-identity select.row-link")) == ["V3", "V4"]
    assert input_values(page.locator("#field-metaphors .row-part")) == ["spaceship", "newcomers"]
    page.click("#submit-btn")
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/annotate/")  # the next item: none left
    a = Annotation.objects.get(pk=mine.pk)
    assert a.status == "submitted"
    assert a.values == {
        "visual": [
            {"id": "V1", "text": "a spaceship lands", "link": None},
            {"id": "V3", "text": "a man in a suit", "link": None},
            {"id": "V4", "text": "a router with antennas", "link": None},
        ],
        "identity": [
            {"id": "I1", "text": "the man is a Zorgian", "link": "V3"},
            {"id": "I2", "text": "the router speaks Zorgian", "link": "V4"},
        ],
        "metaphors": [{"vehicle": "spaceship", "meaning": "newcomers"}],
    }
    # The refused submit is logged by Chromium as a failed (400) resource; nothing else went wrong.
    assert [e for e in page.console_errors if "status of 400" not in e] == []

    # The second annotator disagrees: the item goes to the reviewer.
    ready(annotator_b, project)
    other = claim(annotator_b, project)
    annotation_submit(
        annotator=annotator_b,
        item=other.item,
        version=other.version,
        values={
            "visual": [{"id": "V1", "text": "a flying saucer", "link": None}],
            "identity": [{"id": "I1", "text": "the pilot is from Zorg", "link": "V1"}],
            "metaphors": [{"vehicle": "wifi", "meaning": "what matters first"}],
        },
    )
    task = AdjudicationTask.objects.get()
    first = Annotation.objects.get(pk=task.annotation_ids[0])
    assert first.annotator == annotator_a

    ctx = page.context.browser.new_context()
    rpage = ctx.new_page()
    review_errors = []
    rpage.on("console", lambda m: review_errors.append(m.text) if m.type == "error" else None)
    browser_login(reviewer, pg=rpage)
    rpage.goto(f"{live_server.url}/p/{project.slug}/review/{task.pk}/")
    rpage.wait_for_selector("#review[data-ready]")
    # Both annotators' values, as the types display them.
    visual_row = rpage.locator('tr[data-name="visual"]')
    expect(visual_row.locator("td").nth(0)).to_contain_text("V1: a spaceship lands; V3: a man in a suit")
    expect(visual_row.locator("td").nth(1)).to_contain_text("V1: a flying saucer")
    expect(rpage.locator('tr[data-name="identity"] td').nth(0)).to_contain_text("I1: the man is a Zorgian (→ V3)")
    expect(rpage.locator('tr[data-name="metaphors"] td').nth(1)).to_contain_text("wifi → what matters first")
    # Edit the visual checklist, starting from Annotator 1's items: drop V1, add one.
    visual_row.locator('input[value="edit"]').check()
    editor = visual_row.locator(".editor")
    assert input_values(editor.locator(".row-text")) == [
        "a spaceship lands",
        "a man in a suit",
        "a router with antennas",
    ]
    editor.get_by_label("Remove item V1").click()
    editor.locator("[data-row-add]").click()
    rpage.keyboard.type("a flying saucer")
    expect(editor.locator(".row-id")).to_have_text(["V3", "V4", "V5"])
    # Identity edited too, linked to the new item through the same menus.
    identity_row = rpage.locator('tr[data-name="identity"]')
    identity_row.locator('input[value="edit"]').check()
    identity_row.locator(".editor [data-row-add]").click()
    rpage.keyboard.type("the pilot is from Zorg")
    links = identity_row.locator("select.row-link")
    expect(links.nth(2).locator("option")).to_have_text(
        ["— choose —", "V3: a man in a suit", "V4: a router with antennas", "V5: a flying saucer"]
    )
    links.nth(2).select_option("V5")
    # Pairs: Annotator 2's metaphor, then edited: one more pair.
    metaphor_row = rpage.locator('tr[data-name="metaphors"]')
    metaphor_row.locator('input[value="2"]').check()
    metaphor_row.locator('input[value="edit"]').check()
    assert input_values(metaphor_row.locator(".row-part")) == ["wifi", "what matters first"]
    metaphor_row.locator(".editor [data-row-add]").click()
    metaphor_row.get_by_label("Pair 2 vehicle").fill("spaceship")
    metaphor_row.get_by_label("Pair 2 meaning").fill("newcomers")
    expect(rpage.locator("#save-status")).to_have_text("Draft saved")
    rpage.fill("#note", "Both saw the saucer; A's router is right")
    rpage.click("#save-gold")
    rpage.wait_for_url(f"{live_server.url}/p/{project.slug}/review/")
    gold = GoldRecord.objects.get(item=mine.item)
    assert gold.values["visual"] == [
        {"id": "V3", "text": "a man in a suit", "link": None},
        {"id": "V4", "text": "a router with antennas", "link": None},
        {"id": "V5", "text": "a flying saucer", "link": None},
    ]
    assert gold.values["identity"] == [
        {"id": "I1", "text": "the man is a Zorgian", "link": "V3"},
        {"id": "I2", "text": "the router speaks Zorgian", "link": "V4"},
        {"id": "I3", "text": "the pilot is from Zorg", "link": "V5"},
    ]
    assert gold.values["metaphors"] == [
        {"vehicle": "wifi", "meaning": "what matters first"},
        {"vehicle": "spaceship", "meaning": "newcomers"},
    ]
    assert gold.provenance["visual"]["edited"] is True
    assert review_errors == []
    ctx.close()
