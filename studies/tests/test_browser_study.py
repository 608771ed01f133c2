"""The reference-independence study end to end in Chromium: the lead draws a stratified sample
(strata table before confirming), two participants re-explain blind (the page has the image and
nothing of the reference), a judge judges with the 1/2/3 keys and one item's verdicts conflict,
the lead adjudicates it, and the report shows the compatible share with its CI."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from studies.factories import references_write, staged_project
from studies.models import Reexplanation, StudyItem

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STRATA = [("English", "ACG"), ("English", "ACG"), ("Chinese", "Public life"), ("Chinese", "ACG")]


def _page(chromium_browser, browser_login, user):
    ctx = chromium_browser.new_context(viewport={"width": 1280, "height": 900})
    pg = ctx.new_page()
    errors = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    browser_login(user, pg=pg)
    return ctx, pg, errors


def test_study_end_to_end(chromium_browser, browser_login, live_server, lead, make_user, tmp_path):
    names = ("writer1", "part1", "part2", "judge1")
    people = {n: make_user(n) for n in names}
    project = staged_project("bs", lead=[lead], annotator=list(people.values()))
    references_write(project, [people["writer1"]], tmp_path / "src", STRATA)
    base = f"{live_server.url}/p/{project.slug}/studies/"

    # The lead draws 3 of 4 over language x domain and sees the strata table first.
    ctx, pg, errors = _page(chromium_browser, browser_login, lead)
    pg.goto(f"{live_server.url}/p/{project.slug}/")
    pg.click("#link-studies")
    pg.fill("#id_sample_size", "3")
    pg.fill("#id_seed", "4")
    pg.click("#draw-sample")
    table = pg.locator("#strata-table")
    expect(table).to_contain_text("English × ACG")
    expect(table.locator("tfoot")).to_contain_text("3")
    expect(pg.locator("#confirm-study")).to_be_visible()
    pg.click("#confirm-study")
    expect(pg.locator(".messages")).to_contain_text("confirmed")
    study_url = pg.url
    ctx.close()

    # Two participants re-explain blind: image only.
    references = list(StudyItem.objects.values_list("reference_text", flat=True))
    for name in ("part1", "part2"):
        ctx, pg, errors = _page(chromium_browser, browser_login, people[name])
        pg.goto(base)
        pg.click("[id^=reexplain-next-]")
        for n in range(3):
            expect(pg.locator("h1")).to_have_text("Explain this meme")
            img = pg.locator("#study-image")
            expect(img).to_be_visible()
            pg.wait_for_function(
                "() => { const i = document.getElementById('study-image'); return i.complete && i.naturalWidth > 0; }"
            )
            html = pg.content()
            assert not any(ref in html for ref in references)
            assert "English" not in html and "ACG" not in html and "writer1" not in html
            if name == "part2":
                assert "reading by part1" not in html
            pg.fill("#id_text", f"reading by {name} #{n}")
            here = pg.url
            pg.keyboard.press("Control+Enter")  # submit shortcut
            pg.wait_for_url(lambda url, here=here: url != here)
        expect(pg.locator(".messages")).to_contain_text("your explanation is submitted")
        assert pg.url == base
        assert not errors, errors
        ctx.close()
    assert StudyItem.objects.filter(status="judging").count() == 3

    # The judge: keys 1/2/3 then Enter; the second item's two verdicts conflict.
    keys = iter(["1", "1", "1", "2", "3", "3"])
    ctx, pg, errors = _page(chromium_browser, browser_login, people["judge1"])
    pg.goto(base)
    pg.click("[id^=judge-next-]")
    for _ in range(6):
        expect(pg.locator("#reference-text")).to_be_visible()
        pg.locator("body").click(position={"x": 5, "y": 5})  # focus outside the note
        key = next(keys)
        pg.keyboard.press(key)
        expect(pg.locator(f"input[name=verdict] >> nth={int(key) - 1}")).to_be_checked()
        here = pg.url
        pg.keyboard.press("Enter")
        pg.wait_for_url(lambda url, here=here: url != here)
        expect(pg.locator(".messages")).to_contain_text("Verdict saved")
    assert not errors, errors
    ctx.close()
    assert Reexplanation.objects.exclude(verdict="").count() == 6
    assert StudyItem.objects.filter(status="adjudication").count() == 1

    # The lead adjudicates the conflict and reads the report.
    ctx, pg, errors = _page(chromium_browser, browser_login, lead)
    pg.goto(base)
    pg.click("[id^=adjudicate-next-]")
    expect(pg.locator("h1")).to_contain_text("verdicts differ")
    expect(pg.locator(".reexplanation")).to_have_count(2)
    pg.locator("body").click(position={"x": 5, "y": 5})
    pg.keyboard.press("2")
    pg.keyboard.press("Enter")
    expect(pg.locator(".messages")).to_contain_text("No conflict is waiting")
    pg.goto(study_url)
    share = pg.locator("#report-share")
    expect(share).to_contain_text("67%")
    expect(share).to_contain_text("2 of 3 decided items")
    expect(pg.locator("#report-conflicts")).to_have_text("1")
    expect(pg.locator("#report-strata")).to_contain_text("English × ACG")
    pg.screenshot(path=str(tmp_path / "study.png"), full_page=True)
    assert not errors, errors
    ctx.close()
