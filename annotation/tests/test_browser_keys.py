"""The workspace on the keyboard (issue 17), in Chromium: every shortcut, draw mode and nested
boxes, word snapping, keyboard mention selection, RTL text, undo/redo, auto-advance, the "?"
dialog, the restore banner's reasons. The mouse is used only where a person would draw."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotation.factories import claim, items_open, ready
from annotation.models import Annotation, AnnotatorPreference
from annotation.services import annotation_audit_assign
from annotation.tests.test_submit import CANDIDATE_REPLIES
from candidates.factories import candidates_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TEXT = "When the people from Planet Zorg land and ask for the wifi password"


def open_workspace(page, live_server, project, item_id, kind="annotate"):
    page.goto(f"{live_server.url}/p/{project.slug}/{kind}/{item_id}/")
    page.wait_for_selector("#workspace.ready")


def saved(page, timeout=5000):
    expect(page.locator("#save-status")).to_have_text(re.compile(r"^Saved"), timeout=timeout)


def letter_of(page, field, text):
    """The (shuffled) letter of the candidate whose ``field`` shows ``text``."""
    return (
        page.locator(f'tr[data-row-for="{field}"] td', has_text=text)
        .locator("[data-use-field]")
        .get_attribute("data-letter")
    )


def current_field(page):
    return page.locator("#ann-form .field.current").get_attribute("data-name")


def drag(page, box, start, end):
    x0, y0 = box["x"] + box["width"] * start[0], box["y"] + box["height"] * start[1]
    x1, y1 = box["x"] + box["width"] * end[0], box["y"] + box["height"] * end[1]
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, steps=4)
    page.mouse.move(x1, y1, steps=4)
    page.mouse.up()


def text_drag(page, words, *, first_offset=0, last_offset=0):
    """Drag over ``words`` in the item text, from ``first_offset`` characters into the first word
    to ``last_offset`` characters before the end of the last one (a sloppy selection)."""
    box = page.evaluate(
        """([words, a, b]) => {
            const el = document.getElementById('item-text');
            const node = el.firstChild;
            const at = node.textContent.indexOf(words);
            const r = document.createRange();
            r.setStart(node, at + a); r.setEnd(node, at + a + 1);
            const s = r.getBoundingClientRect();
            r.setStart(node, at + words.length - 1 - b); r.setEnd(node, at + words.length - b);
            const e = r.getBoundingClientRect();
            return {x0: s.left + 1, y0: (s.top + s.bottom) / 2, x1: e.right - 1, y1: (e.top + e.bottom) / 2};
        }""",
        [words, first_offset, last_offset],
    )
    page.mouse.move(box["x0"], box["y0"])
    page.mouse.down()
    page.mouse.move(box["x1"], box["y1"], steps=6)
    page.mouse.up()


@pytest.fixture
def item_with_candidates(project, tmp_path, annotator_a):
    from projects.factories import items_create

    items = items_create(project, tmp_path / "keys", 2, texts=[TEXT, TEXT + " again"])
    items_open(items)
    for it in items:
        candidates_create(it, CANDIDATE_REPLIES)
    ready(annotator_a, project)
    return claim(annotator_a, project)


def test_a_candidate_item_with_the_keyboard_only_then_the_next_item(
    page, browser_login, live_server, project, item_with_candidates, annotator_a
):
    mine = item_with_candidates
    browser_login(annotator_a)
    open_workspace(page, live_server, project, mine.item_id)
    assert current_field(page) == "label"  # the first field is focused on arrival
    full = letter_of(page, "target_entity", "people from Planet Zorg")
    monks = letter_of(page, "target_entity", "Zorg monks")
    # Shift+letter: the whole candidate; the focus goes to the first field where that candidate
    # stands alone (the category: the others say another one or none).
    page.keyboard.press(f"Shift+{full}")
    expect(page.locator("input[name=target_entity]")).to_have_value("people from Planet Zorg")
    assert current_field(page) == "target_category"
    # N / P move; the letter takes the focused field alone from another candidate.
    page.keyboard.press("n")
    assert current_field(page) == "target_entity"
    page.keyboard.press("p")
    assert current_field(page) == "target_category"
    page.keyboard.press(monks.lower())
    assert page.is_checked("input[name=target_category][value='religion and caste']")
    assert page.inner_text("[data-prov-for=target_category]") == f"from candidate {monks}"
    # Then the next field where the candidates differ.
    assert current_field(page) == "target_entity"
    # Enter goes into the text field; keys there are typing, never shortcuts.
    page.keyboard.press("Enter")
    page.keyboard.press("End")
    page.keyboard.type(" a1B?n")
    expect(page.locator("input[name=target_entity]")).to_have_value("people from Planet Zorg a1B?n")
    assert page.is_checked("input[name=target_category][value='religion and caste']")
    assert not page.locator("#keys-help").is_visible()
    for _ in range(len(" a1B?n")):
        page.keyboard.press("Backspace")
    # Esc leaves the text box, back to its field; Ctrl+Enter submits and opens the next item.
    page.keyboard.press("Escape")
    assert current_field(page) == "target_entity"
    page.keyboard.press("Control+Enter")
    page.wait_for_url(re.compile(rf"/p/{project.slug}/annotate/(?!{mine.item_id}/)\d+/$"))
    page.wait_for_selector("#workspace.ready")
    a = Annotation.objects.get(pk=mine.pk)
    assert a.status == "submitted"
    assert a.values["target_category"] == "religion and caste"
    assert a.values["target_entity"] == "people from Planet Zorg"
    assert a.values["visual_region"] == [[10, 20, 300, 400]]
    assert page.console_errors == []


def test_alt_letter_takes_a_candidate_whole_and_submits_and_the_button_does_the_same(
    page, browser_login, live_server, project, item_with_candidates, annotator_a
):
    """One action for an item a candidate gets right: Alt+letter (or "+ submit" under the
    candidate) takes it whole and submits; keys typed into a text box never do it."""
    mine = item_with_candidates
    browser_login(annotator_a)
    open_workspace(page, live_server, project, mine.item_id)
    full = letter_of(page, "target_entity", "people from Planet Zorg")
    # Typing: Alt+letter in a text box is the text box's, not a shortcut (nothing is submitted).
    page.keyboard.press("1")  # harmful: the entity's text box appears
    page.locator("input[name=target_entity]").focus()
    page.keyboard.press(f"Alt+{full}")
    page.wait_for_timeout(300)
    assert Annotation.objects.get(pk=mine.pk).status == "draft"
    page.keyboard.press("Escape")
    page.keyboard.press(f"Alt+{full}")
    page.wait_for_url(re.compile(rf"/p/{project.slug}/annotate/(?!{mine.item_id}/)\d+/$"))
    page.wait_for_selector("#workspace.ready")
    a = Annotation.objects.get(pk=mine.pk)
    assert a.status == "submitted"
    assert a.values == {
        "label": "harmful",
        "target_category": "group background",
        "target_entity": "people from Planet Zorg",
        "text_mention": "people from Planet Zorg",
        "visual_region": [[10, 20, 300, 400]],
    }
    assert {p["letter"] for p in a.provenance.values()} == {full}
    assert not any(p.get("edited") for p in a.provenance.values())
    # The second item, with the mouse: "+ submit" under the non-harmful candidate.
    second = Annotation.objects.get(annotator=annotator_a, status="draft")
    none = letter_of(page, "label", "non-harmful")
    page.locator(f'[data-use-all-submit="{none}"]').click()
    expect(page.locator("#workspace")).to_have_count(0, timeout=10000)
    second.refresh_from_db()
    assert second.status == "submitted"
    assert second.values["label"] == "non-harmful"
    assert page.console_errors == []


def test_option_keys_choose_and_move_on_and_exclusive_checkboxes(
    page, browser_login, live_server, lead, tmp_path, make_user, project, item_with_candidates, annotator_a
):
    browser_login(annotator_a)
    open_workspace(page, live_server, project, item_with_candidates.item_id)
    page.keyboard.press("1")  # harmful: the category shows and gets the focus
    assert page.is_checked("input[name=label][value=harmful]")
    assert current_field(page) == "target_category"
    page.keyboard.press("3")
    assert page.is_checked("input[name=target_category][value=gender]")
    assert current_field(page) == "target_entity"
    # Digits on a text field do nothing (it has no options).
    page.keyboard.press("2")
    expect(page.locator("input[name=target_entity]")).to_have_value("")
    saved(page)
    assert Annotation.objects.get(pk=item_with_candidates.pk).values["target_category"] == "gender"

    # Multiple choice (AHA): digits toggle, "Other" stays alone.
    from projects.factories import items_create, project_with_members

    user = make_user("aha_keys")
    aha = project_with_members("ahakeys", preset="aha", lead=[lead], annotator=[user])
    items_open(items_create(aha, tmp_path / "aha", 1))
    ready(user, aha)
    mine = claim(user, aha)
    ctx = page.context.browser.new_context()
    other = ctx.new_page()
    browser_login(user, pg=other)
    open_workspace(other, live_server, aha, mine.item_id)
    other.keyboard.press("1")  # Hateful
    assert current_field(other) == "hateful_type"
    other.keyboard.press("1")  # Mocking
    other.keyboard.press("4")  # Slurs
    assert other.is_checked("input[name=hateful_type][value=Mocking]") and other.is_checked(
        "input[name=hateful_type][value=Slurs]"
    )
    other.keyboard.press("8")  # Other: exclusive
    assert other.is_checked("input[name=hateful_type][value=Other]")
    assert not other.is_checked("input[name=hateful_type][value=Mocking]")
    other.keyboard.press("1")
    assert not other.is_checked("input[name=hateful_type][value=Other]")
    saved(other)
    assert Annotation.objects.get(pk=mine.pk).values["hateful_type"] == ["Mocking"]
    ctx.close()


def test_draw_mode_draws_nested_boxes_select_mode_moves_and_delete_removes(
    page, browser_login, live_server, project, item_with_candidates, annotator_a
):
    mine = item_with_candidates
    browser_login(annotator_a)
    page.set_viewport_size({"width": 1366, "height": 768})
    open_workspace(page, live_server, project, mine.item_id)
    # Before "harmful", the image says why it cannot be drawn on.
    hint = page.locator("#canvas-hint")
    expect(hint).to_be_visible()
    expect(hint).to_have_text("Visual region: boxes are only needed when Harmfulness is harmful.")
    page.keyboard.press("1")
    expect(hint).to_be_hidden()
    canvas = page.locator("#box-canvas")
    image = canvas.bounding_box()
    drag(page, image, (0.1, 0.1), (0.8, 0.8))  # the outer box
    # In select mode a drag inside a box moves it; in draw mode (B) it draws a new one inside.
    page.keyboard.press("b")
    expect(page.locator("#draw-mode")).to_have_attribute("aria-pressed", "true")
    assert "draw-mode" in canvas.get_attribute("class")
    drag(page, image, (0.3, 0.3), (0.5, 0.5))
    drag(page, image, (0.55, 0.2), (0.7, 0.6))  # overlapping the outer box's edge area
    expect(page.locator("#box-canvas rect.box")).to_have_count(3)
    page.keyboard.press("Escape")  # back to select mode
    expect(page.locator("#draw-mode")).to_have_attribute("aria-pressed", "false")
    saved(page)
    boxes = Annotation.objects.get(pk=mine.pk).values["visual_region"]
    assert boxes[0] == pytest.approx([100, 100, 800, 800], abs=12)
    assert boxes[1] == pytest.approx([300, 300, 500, 500], abs=12)
    assert boxes[2] == pytest.approx([550, 200, 700, 600], abs=12)
    # The list beside the image shows each box's coordinates.
    listed = page.locator("#box-list li")
    expect(listed).to_have_count(3)
    expect(listed.nth(1)).to_contain_text(f"[{', '.join(map(str, boxes[1]))}]")
    # Select mode: a click inside the inner box selects the inner one (smaller boxes lie on top),
    # a drag moves it, Delete removes the selected box only.
    drag(page, image, (0.4, 0.4), (0.45, 0.45))
    saved(page)
    moved = Annotation.objects.get(pk=mine.pk).values["visual_region"]
    assert moved[0] == boxes[0] and moved[1] == pytest.approx([350, 350, 550, 550], abs=12)
    page.keyboard.press("Delete")
    expect(page.locator("#box-canvas rect.box")).to_have_count(2)
    # Undo brings it back, redo removes it again.
    page.keyboard.press("Control+z")
    expect(page.locator("#box-canvas rect.box")).to_have_count(3)
    page.keyboard.press("Control+Shift+z")
    expect(page.locator("#box-canvas rect.box")).to_have_count(2)
    # The corner handles are big enough to hit (at least 24 px).
    page.locator("#box-list li").first.locator("button", has_text="Select").click()
    handle = page.locator("#box-canvas rect.handle-hit").first.bounding_box()
    assert handle["width"] >= 24 and handle["height"] >= 24
    saved(page)
    assert len(Annotation.objects.get(pk=mine.pk).values["visual_region"]) == 2
    assert page.console_errors == []


def test_undo_and_redo_of_choices_candidates_and_text(
    page, browser_login, live_server, project, item_with_candidates, annotator_a
):
    browser_login(annotator_a)
    open_workspace(page, live_server, project, item_with_candidates.item_id)
    page.keyboard.press("1")
    page.keyboard.press("2")  # religion and caste
    page.keyboard.press("Enter")
    page.keyboard.type("Zorgians")
    page.keyboard.press("Escape")
    page.keyboard.press("Control+z")  # the typing is one step
    expect(page.locator("input[name=target_entity]")).to_have_value("")
    page.keyboard.press("Control+z")
    assert not page.is_checked("input[name=target_category][value='religion and caste']")
    page.keyboard.press("Control+z")
    assert not page.is_checked("input[name=label][value=harmful]")
    assert page.is_hidden("#field-target_category")
    page.keyboard.press("Control+Shift+z")
    page.keyboard.press("Control+y")
    page.keyboard.press("Control+Shift+z")
    expect(page.locator("input[name=target_entity]")).to_have_value("Zorgians")
    assert page.is_checked("input[name=target_category][value='religion and caste']")
    saved(page)
    values = Annotation.objects.get(pk=item_with_candidates.pk).values
    assert values["label"] == "harmful" and values["target_entity"] == "Zorgians"


def test_mentions_snap_to_words_highlight_and_clear_on_click(
    page, browser_login, live_server, project, item_with_candidates, annotator_a
):
    mine = item_with_candidates
    browser_login(annotator_a)
    open_workspace(page, live_server, project, mine.item_id)
    page.keyboard.press("1")
    # A sloppy drag from inside "people" to inside "Planet": whole words, filled at once.
    text_drag(page, "people from Planet", first_offset=2, last_offset=2)
    expect(page.locator("input[name=text_mention]")).to_have_value("people from Planet")
    mark = page.locator("#item-text mark.mention")
    expect(mark).to_have_text("people from Planet")
    assert page.inner_text("#item-text") == TEXT  # the text itself is untouched
    saved(page)
    value = Annotation.objects.get(pk=mine.pk).values["text_mention"]
    assert value == "people from Planet" and value in TEXT
    mark.click()
    expect(page.locator("input[name=text_mention]")).to_have_value("")
    expect(page.locator("#item-text mark")).to_have_count(0)
    # The keyboard: M, then words; Shift+arrows widen; Enter takes the span.
    page.keyboard.press("m")
    for _ in range(2):
        page.keyboard.press("ArrowRight")
    page.keyboard.press("Shift+ArrowRight")
    page.keyboard.press("Shift+ArrowRight")
    page.keyboard.press("Shift+ArrowRight")
    page.keyboard.press("Shift+ArrowLeft")
    expect(page.locator("#item-text mark.kbd-selection")).to_have_text("people from Planet")
    page.keyboard.press("Shift+ArrowRight")
    page.keyboard.press("Enter")
    expect(page.locator("input[name=text_mention]")).to_have_value("people from Planet Zorg")
    # Delete on the focused field clears it; undo brings it back.
    assert current_field(page) == "text_mention"
    page.keyboard.press("Delete")
    expect(page.locator("input[name=text_mention]")).to_have_value("")
    page.keyboard.press("Control+z")
    expect(page.locator("input[name=text_mention]")).to_have_value("people from Planet Zorg")
    saved(page)
    assert Annotation.objects.get(pk=mine.pk).values["text_mention"] == "people from Planet Zorg"


def test_char_snapping_and_cjk_characters(page, browser_login, live_server, project, tmp_path, annotator_a):
    from projects.factories import items_create
    from projects.presets import MEME3W_SCHEMA
    from projects.services import project_schema_update

    schema = {"fields": [dict(f) for f in MEME3W_SCHEMA["fields"]]}
    schema["fields"][3]["snap"] = "char"
    project = project_schema_update(project=project, schema=schema)
    items = items_create(project, tmp_path / "snap", 2, texts=[TEXT, "火星人来了，先问无线网络密码"])
    items_open(items)
    ready(annotator_a, project)
    browser_login(annotator_a)
    first = claim(annotator_a, project)
    open_workspace(page, live_server, project, first.item_id)
    page.keyboard.press("1")
    text_drag(page, "people from Planet", first_offset=2, last_offset=2)
    expect(page.locator("input[name=text_mention]")).to_have_value("ople from Plan")  # "char": as selected
    # Back to word snapping: CJK characters are words of their own, so nothing is added.
    schema["fields"][3]["snap"] = "word"
    project_schema_update(project=project, schema=schema)
    from annotation.services import annotation_skip

    annotation_skip(annotator=annotator_a, item=first.item, reason="unreadable", note="")
    second = claim(annotator_a, project)
    open_workspace(page, live_server, project, second.item_id)
    page.keyboard.press("1")
    text_drag(page, "火星人", first_offset=0, last_offset=0)
    expect(page.locator("input[name=text_mention]")).to_have_value("火星人")
    saved(page)
    assert Annotation.objects.get(pk=second.pk).values["text_mention"] == "火星人"


def test_rtl_text_is_shown_right_to_left_and_keyboard_selection_follows_it(
    page, browser_login, live_server, project, tmp_path, annotator_a
):
    from projects.factories import items_create

    arabic = "عندما يصل سكان كوكب زورغ يسألون عن كلمة سر الواي فاي"
    items = items_create(project, tmp_path / "rtl", 1, texts=[arabic])
    items_open(items)
    ready(annotator_a, project)
    mine = claim(annotator_a, project)
    browser_login(annotator_a)
    open_workspace(page, live_server, project, mine.item_id)
    text = page.locator("#item-text")
    assert text.get_attribute("dir") == "auto"
    assert text.evaluate("el => getComputedStyle(el).direction") == "rtl"
    page.keyboard.press("1")
    page.keyboard.press("m")
    # In right-to-left text the next word is to the left.
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("Shift+ArrowLeft")
    page.keyboard.press("Shift+ArrowLeft")
    expect(page.locator("#item-text mark.kbd-selection")).to_have_text("سكان كوكب زورغ")
    page.keyboard.press("Enter")
    field = page.locator("input[name=text_mention]")
    expect(field).to_have_value("سكان كوكب زورغ")
    assert field.get_attribute("dir") == "auto"
    assert field.evaluate("el => getComputedStyle(el).direction") == "rtl"
    page.keyboard.press("p")  # back to the entity: typed Arabic shows right to left too
    page.keyboard.press("Enter")
    page.keyboard.type("سكان زورغ")
    assert page.locator("input[name=target_entity]").evaluate("el => getComputedStyle(el).direction") == "rtl"
    saved(page)
    values = Annotation.objects.get(pk=mine.pk).values
    assert values["text_mention"] == "سكان كوكب زورغ" and values["text_mention"] in arabic
    assert values["target_entity"] == "سكان زورغ"


def test_skip_and_the_keys_dialog_with_the_keyboard(
    page, browser_login, live_server, project, item_with_candidates, annotator_a
):
    browser_login(annotator_a)
    open_workspace(page, live_server, project, item_with_candidates.item_id)
    page.keyboard.press("?")
    dialog = page.locator("#keys-help")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("take candidate A / B / C whole")
    expect(dialog).to_contain_text("draw mode")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    # Hints beside the controls.
    expect(page.locator("#submit-btn kbd")).to_have_text("Ctrl+Enter")
    expect(page.locator("#field-label kbd.key-hint").first).to_have_text("1")
    expect(page.locator("[data-use-all] kbd").first).to_contain_text("⇧")
    page.keyboard.press("s")
    expect(page.locator("#skip-card")).to_have_attribute("open", "")
    page.keyboard.press("4")  # "The image or text cannot be read"
    assert page.is_checked("input[name=reason][value=unreadable]")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/annotate/")
    assert Annotation.objects.get(pk=item_with_candidates.pk).status == "skipped"


def test_auto_advance_is_a_setting_and_the_restore_banner_says_why(
    page, browser_login, live_server, project, item_with_candidates, annotator_a
):
    mine = item_with_candidates
    browser_login(annotator_a)
    open_workspace(page, live_server, project, mine.item_id)
    toggle = page.locator("#auto-advance input[name=auto_advance]")
    assert toggle.is_checked()  # on by default
    toggle.uncheck()
    expect(page.locator("#auto-advance input[name=auto_advance]")).not_to_be_checked()
    page.wait_for_timeout(300)
    assert AnnotatorPreference.objects.get(user=annotator_a, project=project).auto_advance is False
    # A change, then the page is reloaded before the autosave: the banner says so on return.
    page.keyboard.press("2")  # non-harmful
    page.reload()
    page.wait_for_selector("#workspace.ready")
    expect(page.locator("#ws-banner")).to_contain_text("You reloaded or left this page")
    expect(page.locator("#ws-banner")).to_contain_text("not saved to the server")
    page.click("text=Restore them")
    assert page.is_checked("input[name=label][value=non-harmful]")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#ws-banner")).to_contain_text("Submitted.")
    assert page.url.endswith(f"/annotate/{mine.item_id}/")  # the setting is off: we stay
    assert Annotation.objects.get(pk=mine.pk).status == "submitted"
    # The submit answer says nothing about where the item went.
    body = page.evaluate("""async () => {
        const r = await fetch(location.pathname.replace('/p/', '/api/projects/') + 'submit', {method: 'POST',
          headers: {'Content-Type': 'application/json', 'X-CSRFToken': JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRFToken']},
          body: JSON.stringify({values: {label: 'non-harmful'}, version: 0})});
        return await r.text(); }""")
    assert "rout" not in body and "adjudicat" not in body and "gold" not in body


def test_audit_on_the_keyboard_without_candidates_and_without_adjudication(
    page, browser_login, live_server, project, tmp_path, auditor
):
    from projects.factories import items_create

    items = items_create(project, tmp_path / "audit", 2, texts=[TEXT, TEXT + " twice"])
    items_open(items)
    for it in items:
        candidates_create(it, CANDIDATE_REPLIES)
    ready(auditor, project)
    for it in items:
        annotation_audit_assign(auditor=auditor, item=it)
    browser_login(auditor)
    open_workspace(page, live_server, project, items[0].pk, kind="audit")
    content = page.content()
    assert "adjudicat" not in content.lower() and "Candidate A" not in content and "Zorg monks" not in content
    page.keyboard.press("1")
    page.keyboard.press("1")  # group background
    page.keyboard.press("Enter")
    page.keyboard.type("people from Planet Zorg")
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # no candidates: B is draw mode wherever the focus is
    expect(page.locator("#draw-mode")).to_have_attribute("aria-pressed", "true")
    image = page.locator("#box-canvas").bounding_box()
    drag(page, image, (0.2, 0.2), (0.6, 0.7))
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Enter")
    # On to the next audit item (the setting is on by default).
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/audit/{items[1].pk}/")
    page.wait_for_selector("#workspace.ready")
    assert "adjudicat" not in page.content().lower()
    first = Annotation.objects.get(item=items[0], annotator=auditor, kind="audit")
    assert first.status == "submitted" and first.values["target_entity"] == "people from Planet Zorg"
    assert len(first.values["visual_region"]) == 1
    assert page.console_errors == []


def test_alt_keeps_a_mention_inside_a_word(
    page, browser_login, live_server, project, item_with_candidates, annotator_a
):
    mine = item_with_candidates
    browser_login(annotator_a)
    open_workspace(page, live_server, project, mine.item_id)
    page.keyboard.press("1")
    # With the mouse: Alt held while selecting keeps the characters as selected.
    page.keyboard.down("Alt")
    text_drag(page, "people from Planet", first_offset=2, last_offset=2)
    page.keyboard.up("Alt")
    field = page.locator("input[name=text_mention]")
    expect(field).to_have_value("ople from Plan")
    # With the keyboard: Alt+arrows move the start, Alt+Shift+arrows the end, by one character.
    page.keyboard.press("m")
    page.keyboard.press("Alt+ArrowLeft")
    page.keyboard.press("Alt+ArrowLeft")
    page.keyboard.press("Alt+Shift+ArrowRight")
    page.keyboard.press("Alt+Shift+ArrowRight")
    expect(page.locator("#item-text mark.kbd-selection")).to_have_text("people from Planet")
    page.keyboard.press("Alt+Shift+ArrowLeft")
    page.keyboard.press("Enter")
    expect(field).to_have_value("people from Plane")
    saved(page)
    assert Annotation.objects.get(pk=mine.pk).values["text_mention"] == "people from Plane"


def test_a_prefilled_form_shows_the_candidates_agreement_and_ctrl_enter_submits_it(
    page, browser_login, live_server, project, tmp_path, annotator_a
):
    """``prefill: agreement``: the page opens with what most candidates agree on, each field
    marked with the letter it came from; one key submits it; a field changed before submitting
    is stored as edited."""
    from projects.factories import items_create

    project.workflow = [
        {"name": "annotate", "fields": project.get_schema().names, "annotators": 2, "prefill": "agreement"}
    ]
    project.save(update_fields=["workflow"])
    full = dict(CANDIDATE_REPLIES[0])
    replies = [full, {**full, "target_entity": "Zorgians"}, {**full, "visual_region": []}]
    items = items_create(project, tmp_path / "prefill", 2, texts=[TEXT, TEXT + " again"])
    items_open(items)
    for it in items:
        candidates_create(it, replies)
    ready(annotator_a, project)
    mine = claim(annotator_a, project)
    browser_login(annotator_a)
    open_workspace(page, live_server, project, mine.item_id)
    expect(page.locator("#prefill-note")).to_be_visible()
    assert page.is_checked("input[name=label][value=harmful]")
    assert page.is_checked("input[name=target_category][value='group background']")
    expect(page.locator("input[name=target_entity]")).to_have_value("people from Planet Zorg")
    expect(page.locator("input[name=text_mention]")).to_have_value("people from Planet Zorg")
    other = letter_of(page, "target_entity", "Zorgians")
    first = min(set("ABC") - {other})  # the first of the two agreeing letters carries the value
    assert page.inner_text("[data-prov-for=target_entity]") == f"from candidate {first}"
    assert "candidate_id" not in page.content()
    page.keyboard.press("Control+Enter")
    page.wait_for_url(re.compile(rf"/p/{project.slug}/annotate/(?!{mine.item_id}/)\d+/$"))
    page.wait_for_selector("#workspace.ready")
    a = Annotation.objects.get(pk=mine.pk)
    assert a.status == "submitted"
    assert a.values == {**full, "visual_region": [[10, 20, 300, 400]]}
    assert a.provenance["target_entity"]["letter"] == first
    assert not any(p["edited"] for p in a.provenance.values())
    # The second item: the annotator changes a pre-filled entity before submitting.
    second = Annotation.objects.get(annotator=annotator_a, status="draft")
    assert second.values["target_entity"] == "people from Planet Zorg"
    entity = page.locator("input[name=target_entity]")
    entity.fill("Zorg settlers")
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#workspace")).to_have_count(0, timeout=10000)
    second.refresh_from_db()
    assert second.status == "submitted" and second.values["target_entity"] == "Zorg settlers"
    assert second.provenance["target_entity"]["edited"] is True
    assert second.provenance["label"]["edited"] is False
    assert page.console_errors == []
