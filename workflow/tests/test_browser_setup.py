"""Issue 12 end to end in Debian's Chromium, through pages alone: a staff user lets a lead
create projects; the lead creates a custom project (a choice, a multichoice shown only for one
choice, boxes), writes the guideline, invites two annotators and a reviewer by link and imports
a zip; the invitees set their passwords and annotate; the reviewer adjudicates; the lead reads
the agreement report with a figure per field."""

from __future__ import annotations

import io
import json
import os
import zipfile

import pytest
from playwright.sync_api import expect

from adjudication.models import GoldRecord
from annotation.models import Annotation
from projects.factories import PASSWORD, image_bytes
from projects.models import Item, Project, Stage

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TEXTS = ["They always blame the new neighbours", "Monday again, send coffee"]
#: SETUP_SCREENSHOTS=/some/dir saves the setup pages as PNG files there.
SHOTS = os.environ.get("SETUP_SCREENSHOTS")


def _shot(page, name):
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, f"{name}.png"), full_page=True)


def _zip(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        rows = []
        for i, text in enumerate(TEXTS):
            z.writestr(f"img{i}.jpg", image_bytes(100 + i))
            rows.append({"image": f"img{i}.jpg", "text": text, "source_id": f"m{i}"})
        z.writestr("manifest.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "memes.zip"
    path.write_bytes(buf.getvalue())
    return path


def _drag(page, selector, start, end):
    box = page.locator(selector).bounding_box()
    x0, y0 = box["x"] + box["width"] * start[0], box["y"] + box["height"] * start[1]
    x1, y1 = box["x"] + box["width"] * end[0], box["y"] + box["height"] * end[1]
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, steps=4)
    page.mouse.move(x1, y1, steps=4)
    page.mouse.up()


def _join(chromium_browser, url, username):
    """An invitee opens their link and sets a password; returns their page (logged in)."""
    pg = chromium_browser.new_context().new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.console_errors = errors
    pg.goto(url)
    pg.fill("#id_username", username)
    pg.fill("#id_password", PASSWORD)
    pg.fill("#id_password2", PASSWORD)
    pg.click("#accept-invitation")
    expect(pg.locator(".messages")).to_contain_text("Welcome")
    return pg


def _annotate(pg, live_server, slug, answers):
    """Annotate the queue: answers[i] = (stance, tactics, draw a box?) for the i-th item given."""
    pg.goto(f"{live_server.url}/p/{slug}/")
    pg.click("text=Annotate")
    pg.wait_for_selector("#content-warning")
    pg.click("#accept-warning")
    pg.click("#next-btn")
    for stance, tactics, box in answers:
        pg.wait_for_selector("#workspace.ready")
        assert pg.is_hidden("#field-tactics")  # shown only for "attack"
        pg.check(f"input[name=stance][value={stance}]")
        if stance == "attack":
            expect(pg.locator("#field-tactics")).to_be_visible()
            for t in tactics:
                pg.check(f"input[name=tactics][value='{t}']")
            if box:
                _drag(pg, "#box-canvas", box[0], box[1])
                expect(pg.locator("#box-canvas rect.box")).to_have_count(1)
        else:
            assert pg.is_hidden("#field-tactics") and pg.is_hidden("#field-where")
        before = pg.url
        pg.click("#submit-btn")
        pg.wait_for_url(lambda url, before=before: url != before)  # "next item after submit" moves on
    expect(pg.locator("body")).to_contain_text("No items are waiting")
    assert pg.console_errors == []


def test_a_group_sets_up_its_study_through_pages_alone(
    page, browser_login, live_server, chromium_browser, make_user, tmp_path
):
    staff = make_user("site_staff", is_staff=True)
    lead = make_user("group_lead", email="lead@example.org")
    page.set_viewport_size({"width": 1400, "height": 1000})

    # 1. Staff lets the lead create projects.
    browser_login(staff)
    page.click("#staff-creators")
    page.click("[data-grant=group_lead]")
    expect(page.locator(".messages")).to_contain_text("group_lead may create projects")
    page.context.clear_cookies()

    # 2. The lead creates a custom project; a taken slug is explained and nothing is lost.
    browser_login(lead)
    page.click("#new-project")
    page.fill("#id_name", "Neighbours study")
    page.fill("#id_slug", "admin")
    page.check("input[name=preset][value=custom]")
    page.click("#create-btn")
    expect(page.locator("#error-slug")).to_contain_text("reserved")
    assert page.input_value("#id_name") == "Neighbours study"
    page.fill("#id_slug", "neighbours")
    page.click("#create-btn")
    expect(page.locator("main > h1")).to_have_text("Neighbours study")
    slug = "neighbours"

    # 3. Schema: a choice, a multichoice shown only for "attack" (with an exclusive option), boxes.
    page.click("#link-schema")
    page.fill("#f-0-name", "stance")
    page.fill("#f-0-label", "Stance")
    page.fill("#f-0-choices", "attack\nsupport\nneutral")
    page.click("#add-field")
    page.fill("#f-1-name", "tactics")
    page.select_option("#f-1-type", "multichoice")
    page.fill("#f-1-label", "Tactics")
    page.fill("#f-1-choices", "irony\nslur\nnone of these")
    page.fill("#f-1-exclusive", "none of these")
    page.fill("#f-1-visible_field", "stance")
    page.fill("#f-1-visible_in", "attac")  # a typo: named in the preview and on save
    page.click("#add-field")
    assert page.input_value("#f-0-choices") == "attack\nsupport\nneutral"  # kept across the round trip
    page.fill("#f-2-name", "where")
    page.select_option("#f-2-type", "boxes")
    page.fill("#f-2-label", "Where")
    page.fill("#f-2-visible_field", "stance")
    page.fill("#f-2-visible_in", "attack")
    expect(page.locator("#preview-problems")).to_contain_text("attac is not a choice of stance")
    page.click("#save-schema")
    expect(page.locator("#schema-problems")).to_contain_text("field 2 (tactics)")
    assert [e for e in page.console_errors if "status of 400" not in e] == []
    page.console_errors.clear()  # the refused save answered 400, as it should
    page.fill("#f-1-visible_in", "attack")
    page.check("input[name='f-0-required']")
    page.check("input[name='f-1-required']")
    page.locator("#f-1-label").press("Tab")  # a change: the live preview follows the form
    expect(page.locator("#preview-root [data-widget=checkboxes]")).to_have_count(1)
    assert page.is_hidden("#pfield-tactics")
    page.check("#preview-root input[name='p-stance'][value=attack]")
    expect(page.locator("#pfield-tactics")).to_be_visible()
    page.click("#preview-check")  # tactics is required once shown
    expect(page.locator("#preview-result")).to_contain_text("Not accepted")
    expect(page.locator("#pfield-tactics .field-error")).to_contain_text("is required")
    page.check("#preview-root input[name='p-tactics'][value=irony]")
    page.check("#preview-root input[name='p-tactics'][value='none of these']")  # exclusive: irony goes
    assert not page.is_checked("#preview-root input[name='p-tactics'][value=irony]")
    page.click("#preview-check")
    expect(page.locator("#preview-result")).to_have_text("These values would be accepted.")
    _shot(page, "schema-editor")
    page.click("#save-schema")
    expect(page.locator(".messages")).to_contain_text("Schema version 1 saved")
    project = Project.objects.get(slug=slug)
    assert [(f["name"], f["type"]) for f in project.schema["fields"]] == [
        ("stance", "choice"),
        ("tactics", "multichoice"),
        ("where", "boxes"),
    ]
    assert project.schema["fields"][1]["visible_if"] == {"field": "stance", "in": ["attack"]}

    # 4. Guideline in Markdown (raw HTML shown as text).
    page.goto(f"{live_server.url}/p/{slug}/guideline/")
    page.fill("#id_text", "# Neighbours\n\n- **attack**: the meme attacks newcomers\n- <b>not bold</b>")
    page.fill("#id_note", "first version")
    page.click("#guideline-save")
    expect(page.locator("#guideline-preview h3")).to_have_text("Neighbours")
    expect(page.locator("#guideline-preview")).to_contain_text("<b>not bold</b>")

    # 5. Invitations by link: two annotators and a reviewer.
    links = {}
    for email, role in (
        ("ann1@example.org", "annotator"),
        ("ann2@example.org", "annotator"),
        ("rev@example.org", "reviewer"),
    ):
        page.goto(f"{live_server.url}/p/{slug}/setup/members/")
        page.fill("#invite-email", email)
        form = page.locator("#invite-member")
        for box in form.locator("input[name=roles]").all():
            box.set_checked(box.get_attribute("value") == role)
        page.click("#invite-btn")
        links[email] = page.locator(f".invite-url[data-email='{email}']").input_value()
    _shot(page, "members")
    # an address with a pending invitation is refused with a message
    page.fill("#invite-email", "ann1@example.org")
    page.click("#invite-btn")
    expect(page.locator(".messages")).to_contain_text("pending invitation")

    # 6. Import a zip, then start annotation without candidates.
    page.goto(f"{live_server.url}/p/{slug}/import/")
    page.set_input_files("input[type=file]", str(_zip(tmp_path)))
    page.click("text=Upload and import")
    expect(page.locator(".messages")).to_contain_text("Import of memes.zip started")
    page.goto(f"{live_server.url}/p/{slug}/candidates/")
    page.click("#skip-button")
    expect(page.locator(".messages")).to_contain_text("2 item(s) moved to annotation")
    first, second = Item.objects.filter(project=project).order_by("id")

    # 7. The invitees set passwords and annotate: they agree on the first item, differ on the second.
    ann1 = _join(chromium_browser, links["ann1@example.org"], "ann_one")
    _annotate(ann1, live_server, slug, [("neutral", [], None), ("attack", ["irony"], ((0.1, 0.1), (0.5, 0.6)))])
    ann2 = _join(chromium_browser, links["ann2@example.org"], "ann_two")
    _annotate(ann2, live_server, slug, [("neutral", [], None), ("attack", ["slur"], ((0.12, 0.1), (0.5, 0.62)))])
    assert Annotation.objects.filter(item__project=project, status="submitted").count() == 4
    assert Item.objects.get(pk=first.pk).stage == Stage.GOLD  # identical
    assert Item.objects.get(pk=second.pk).stage == Stage.ADJUDICATION

    # 8. The reviewer adjudicates.
    rev = _join(chromium_browser, links["rev@example.org"], "rev_one")
    rev.goto(f"{live_server.url}/p/{slug}/review/")
    rev.click("#review-next")
    rev.wait_for_selector("#review[data-ready]")
    rev.check('tr[data-name="tactics"] input[value="2"]')
    rev.check('tr[data-name="where"] input[value="1"]')
    rev.fill("#note", "slur is the tactic")
    rev.click("#save-gold")
    rev.wait_for_url(f"{live_server.url}/p/{slug}/review/")
    gold = GoldRecord.objects.get(item=second, is_current=True)
    assert gold.values["tactics"] == ["slur"] and gold.provenance["tactics"]["source"] == "reviewer"
    assert rev.console_errors == []

    # 9. The lead reads the agreement report: a figure for every field.
    page.goto(f"{live_server.url}/p/{slug}/")
    page.click("#link-quality")
    for name in ("tactics", "where"):  # the conditional fields are the headline (Meme3W Stage 2)
        expect(page.locator(f".q-figure[data-field={name}]")).to_have_count(1)
    page.click("text=Agreement report")
    for name in ("stance", "tactics", "where"):
        expect(page.locator(f"#figures-table tr.primary[data-field={name}]")).to_have_count(1)
    expect(page.locator("#figures-table tr.primary[data-field=stance] td.num").first).to_have_text("1.000")
    page.goto(f"{live_server.url}/p/{slug}/setup/members/")
    expect(page.locator("#member-ann_one")).to_contain_text("2")
    assert page.console_errors == [], page.console_errors
    for pg in (ann1, ann2, rev):
        pg.context.close()


def test_settings_and_members_pages_explain_before_they_apply(
    page, browser_login, live_server, project, lead, annotator_a, annotator_b, items, tmp_path
):
    from annotation.factories import MEME3W_HARMFUL, claim, items_open, ready
    from workflow.services import annotation_submit

    items_open(items)
    ready(annotator_a, project)
    a = claim(annotator_a, project)
    annotation_submit(annotator=annotator_a, item=a.item, values=MEME3W_HARMFUL, version=a.version)
    page.set_viewport_size({"width": 1300, "height": 1000})
    browser_login(lead)
    page.goto(f"{live_server.url}/p/{project.slug}/")
    page.click("#link-settings")
    # The split preview follows the ratios as they are typed (htmx) and warns about an empty split.
    page.fill("#split_val", "0")
    expect(page.locator("[data-empty-split=val]")).to_contain_text("would come out empty")
    _shot(page, "settings")
    page.fill("#split_val", "abc")
    expect(page.locator("#split-preview-bad")).to_be_visible()
    page.fill("#split_val", "0.05")
    expect(page.locator("[data-empty-split]")).to_have_count(0)
    # Majority vote needs 3 annotators: refused with the reason; the typed values stay.
    page.check("#rule-majority")
    page.fill("#claim_timeout_minutes", "45")
    page.click("#save-settings")
    expect(page.locator("#error-auto_merge_rules")).to_contain_text("3 or more annotators")
    assert page.input_value("#claim_timeout_minutes") == "45" and page.is_checked("#rule-majority")
    # Lowering annotators per item below what an item has is explained, applied only when confirmed.
    page.uncheck("#rule-majority")
    page.fill("#annotators_per_item", "1")
    page.click("#save-settings")
    expect(page.locator("#error-annotators_per_item")).to_contain_text("routes them at once")
    page.check("#confirm-settings")
    page.click("#save-settings")
    expect(page.locator(".messages")).to_contain_text("Study settings saved")
    project.refresh_from_db()
    assert project.annotators_per_item == 1 and project.claim_timeout_minutes == 45
    assert Item.objects.get(pk=a.item_id).stage == Stage.GOLD

    # Members: a CSV with bad rows lists each one and adds the good ones; the last lead stays.
    page.click("text=" + project.name)
    page.click("#link-members")
    csv_path = tmp_path / "members.csv"
    csv_path.write_text("username,email,roles\nannotator_b,,reviewer\nghost,,annotator\nx,y,z,w\n")
    page.set_input_files("#csv-members input[type=file]", str(csv_path))
    page.click("#csv-members button[type=submit]")
    expect(page.locator("#csv-problems tbody tr")).to_have_count(2)
    expect(page.locator("#csv-problems")).to_contain_text("expected 3 columns")
    expect(page.locator("#member-annotator_b")).to_contain_text("annotator_b")
    assert page.is_checked("#member-annotator_b input[name=roles][value=reviewer]")
    page.click("[data-deactivate=lead]")
    expect(page.locator(".messages")).to_contain_text("last lead")
    page.click("[data-deactivate=annotator_a]")
    expect(page.locator("#member-annotator_a")).to_contain_text("deactivated")
    expect(page.locator("#member-annotator_a td").nth(2)).to_have_text("1")  # past work, counted
    assert [e for e in page.console_errors if "status of 4" not in e] == []
