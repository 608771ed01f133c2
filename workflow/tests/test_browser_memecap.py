"""The MemeCap protocol end to end in Chromium (memecap.txt section 3.2; issue 14 item 6).

A lead imports memes (one row without text: OCR gives it one) and starts annotation; two
round-1 annotators write literal captions looking at the text-free image; two other people
write the meme captions and metaphor pairs, one flags a meme; the lead reads the caption
agreement and builds a release in which test items carry two captions and train items one.
"""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from annotation.factories import ready
from lib.tests.test_ocr import LATIN_FONT, make_meme
from projects.models import Item, ItemVariant, Project, Stage
from projects.services import membership_add

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(LATIN_FONT is None, reason="no TrueType font (apt-get install fonts-dejavu-core)"),
]

CAPTIONS = [
    ("WHEN THE CODE WORKS", "ON THE FIRST TRY"),
    ("ME AFTER", "ONE MORE COFFEE"),
    ("MONDAY MORNING", "AGAIN"),
    ("WHEN THE TESTS", "PASS LOCALLY"),
    ("NOBODY:", "ME AT 3 AM"),
    ("THE BUILD", "IS GREEN"),
]


#: Six different pictures (scikit-image's bundled samples): memes sharing a picture would be
#: near-duplicate pairs, which the split keeps together whatever round 2 pinned.
PICTURES = ["astronaut", "chelsea", "coffee", "rocket", "immunohistochemistry", "hubble_deep_field"]


def _picture(name: str):
    from skimage import data

    return getattr(data, name)()


def _zip(tmp_path) -> str:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        rows = []
        for i, (top, bottom) in enumerate(CAPTIONS):
            # A different picture each: memes sharing a picture are near-duplicate pairs, kept in one split.
            img = make_meme(_picture(PICTURES[i]), top, bottom).image
            out = io.BytesIO()
            img.save(out, format="PNG")
            z.writestr(f"m{i}.png", out.getvalue())
            row = {"image": f"m{i}.png", "source_id": f"m{i}", "title": f"meme {i}", "source_dataset": "test"}
            row["redistributable"] = "yes" if i % 2 == 0 else "no"
            if i != 1:  # m1 has no text in the manifest: OCR reads it
                row["text"] = f"{top} {bottom}"
            rows.append(json.dumps(row))
        z.writestr("manifest.jsonl", "\n".join(rows) + "\n")
    path = tmp_path / "memes.zip"
    path.write_bytes(buf.getvalue())
    return str(path)


def _page_for(chromium_browser, browser_login, user):
    ctx = chromium_browser.new_context(viewport={"width": 1366, "height": 900})
    pg = ctx.new_page()
    browser_login(user, pg=pg)
    return ctx, pg


def _next(pg, base) -> bool:
    """Press "Next item" on the annotator's home; True when an item opened."""
    pg.goto(f"{base}/annotate/")
    pg.click("#next-btn")
    pg.wait_for_load_state()
    if "/annotate/" in pg.url and pg.url.rstrip("/").split("/")[-1].isdigit():
        pg.wait_for_selector("#workspace.ready")
        return True
    return False


def _item_id(pg) -> int:
    return int(pg.url.rstrip("/").split("/")[-1])


def _submit(pg):
    with pg.expect_navigation():
        pg.click("#submit-btn")


def test_memecap_protocol_in_the_browser(chromium_browser, browser_login, live_server, lead, make_user, tmp_path):
    # The lead (allowed to create projects by the site staff) creates the MemeCap project on its page.
    lead.user_permissions.add(Permission.objects.get(codename="create_project", content_type__app_label="projects"))
    lctx, lp = _page_for(chromium_browser, browser_login, lead)
    lp.goto(f"{live_server.url}/projects/new/")
    lp.fill("#id_name", "MemeCap study")
    lp.fill("#id_slug", "mc")
    lp.check("input[name=preset][value=memecap]")
    lp.click("#create-btn")
    lp.wait_for_url(f"{live_server.url}/p/mc/**")
    project = Project.objects.get(slug="mc")
    assert project.preset == "memecap" and project.ocr_on_import and len(project.workflow) == 2
    project.split_ratios = [0.5, 0.0, 0.5]
    # Two pools, as in the paper: literal captions by some people, meme captions by others.
    project.workflow = [
        {**project.workflow[0], "workers": ["lit1", "lit2"]},
        {**project.workflow[1], "workers": ["cap1", "cap2"]},
    ]
    project.save(update_fields=["split_ratios", "workflow"])
    people = {name: make_user(name) for name in ("lit1", "lit2", "cap1", "cap2")}
    for u in people.values():
        membership_add(project=project, user=u, role="annotator")
        ready(u, project)
    base = f"{live_server.url}/p/{project.slug}"

    # The lead imports the memes; OCR reads them, paints the text-free variants and gives m1 its text.
    lp.goto(f"{base}/import/")
    lp.set_input_files("input[type=file][name=file]", _zip(tmp_path))
    lp.click("text=Upload and import")
    lp.wait_for_selector(".job-import .imported")
    assert lp.inner_text(".job-import .imported") == "6"
    lp.goto(f"{base}/import/")
    expect(lp.locator("#ocr-counts")).to_contain_text("6 of 6 items read")
    m1 = Item.objects.get(project=project, source_id="m1")
    assert m1.text_from_ocr and "COFFEE" in m1.text.upper()
    assert ItemVariant.objects.filter(item__project=project, kind="textfree").count() == 6
    lp.goto(f"{base}/candidates/")
    lp.click("#skip-button")  # no candidates in MemeCap: start annotation
    assert Item.objects.filter(project=project, stage=Stage.ANNOTATING).count() == 6

    # Round 1: two annotators side by side, each on the text-free image, no meme text shown.
    pages = {name: _page_for(chromium_browser, browser_login, people[name]) for name in ("lit1", "lit2")}
    literal = {}
    for _, pg in pages.values():
        assert _next(pg, base)
    while pages:
        for name in list(pages):
            pg = pages[name][1]
            assert pg.get_attribute("#item-image", "data-variant") == "textfree"
            assert "/image/textfree" in pg.get_attribute("#item-image", "src")
            assert pg.inner_text("#item-text") == "" and pg.locator(".item-text-card").count() == 0  # text not sent
            assert Item.objects.get(pk=_item_id(pg)).text not in pg.content()
            item_id = _item_id(pg)
            literal[item_id] = name
            pg.fill("#field-image_caption textarea", f"an astronaut or a cup, item {item_id}")
            _submit(pg)
            if not (pg.url.rstrip("/").split("/")[-1].isdigit()):
                pages.pop(name)[0].close()
            else:
                pg.wait_for_selector("#workspace.ready")
    assert len(literal) == 6 and set(literal.values()) == {"lit1", "lit2"}

    # Round 2 by other people: the original image, the title and the literal caption shown.
    c1ctx, c1 = _page_for(chromium_browser, browser_login, people["cap1"])
    assert _next(c1, base)
    done1 = []
    while True:
        assert c1.get_attribute("#item-image", "data-variant") == "original"
        expect(c1.locator(".earlier-stage").first).to_contain_text("an astronaut or a cup")
        item_id = _item_id(c1)
        done1.append(item_id)
        c1.click("#field-metaphors [data-row-add]")
        c1.get_by_label("Pair 1 vehicle").fill("astronaut")
        c1.get_by_label("Pair 1 meaning").fill(f"the poster {item_id}")
        c1.fill("#field-meme_caption textarea", f"the poster is proud that the code worked, item {item_id}")
        _submit(c1)
        if not c1.url.rstrip("/").split("/")[-1].isdigit():
            break
        c1.wait_for_selector("#workspace.ready")
    c1ctx.close()
    assert sorted(done1) == sorted(literal)
    test_items = [pk for pk in done1 if Item.objects.get(pk=pk).split == "test"]
    assert len(test_items) >= 2, "the split gave fewer than two test items: change the seed"

    # cap2 is handed the test items only (they want two meme captions); flags one of them.
    c2ctx, c2 = _page_for(chromium_browser, browser_login, people["cap2"])
    second = []
    while _next(c2, base):
        item_id = _item_id(c2)
        second.append(item_id)
        if len(second) == 1:
            c2.click("#flag-card summary")
            c2.check("input[name=reason][value=offensive]")
            c2.fill("#flag-note", "mocks a group")
            with c2.expect_navigation():
                c2.click("#flag-btn")
            expect(c2.locator(".messages")).to_contain_text("flagged")
            continue
        c2.fill("#field-meme_caption textarea", f"the poster is happy the code ran, item {item_id}")
        _submit(c2)
    c2ctx.close()
    assert sorted(second) == sorted(test_items)
    flagged = Item.objects.get(pk=second[0])
    assert flagged.stage == Stage.EXCLUDED and flagged.excluded_reason.startswith("offensive")

    # The lead reads the caption agreement between the two round-2 annotators.
    lp.goto(f"{base}/quality/agreement/")
    compute = lp.locator("#compute-report, button:has-text('Compute')")
    if compute.count():
        compute.first.click()
        lp.wait_for_load_state()
        lp.goto(f"{base}/quality/agreement/")
    table = lp.locator("#figures-table")
    expect(table).to_contain_text("Meme caption")
    expect(table).to_contain_text("BLEU-4")
    expect(table).to_contain_text("ROUGE-L")

    # ... and builds a release: test items carry two captions, train items one; the flagged one is out.
    lp.goto(f"{base}/releases/")
    lp.click("#build-release")  # eager in tests: the release is there when the page comes back
    lp.goto(f"{base}/releases/v1/")
    expect(lp.locator("main")).to_contain_text("v1")
    from exports.models import Release
    from exports.selectors import release_dir

    release = Release.objects.get(project=project, number=1)
    folder = release_dir(release)
    records = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
    by_id = {r["item_id"]: r for r in records}
    assert flagged.pk not in by_id
    for pk in done1:
        if pk == flagged.pk:
            continue
        gold = by_id[pk]["gold"]
        want = 2 if pk in test_items else 1
        assert by_id[pk]["split"] == ("test" if pk in test_items else "train")
        assert isinstance(gold["meme_caption"], list) and len(gold["meme_caption"]) == want, (pk, gold)
        assert len(gold["image_caption"]) == 1
    # The datasheet says how many references items carry per split.
    readme = (folder / "README.md").read_text()
    assert "`meme_caption` keeps every annotator's value as a list of references" in readme
    assert "test: 1 item with 2" in readme or "test: " in readme and "with 2" in readme
    # The text-free variants ship beside the originals, for redistributable items only.
    variants = [json.loads(line) for line in (folder / "variants.jsonl").read_text().splitlines()]
    shipped = {v["item_id"] for v in variants}
    assert shipped == {pk for pk, r in by_id.items() if r["image"]["redistributable"]} and shipped
    assert all((folder / v["file"]).is_file() and v["kind"] == "textfree" for v in variants)
    lctx.close()
