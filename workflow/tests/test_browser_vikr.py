"""MemeBench's construction (issue 15 deliverable 1) end to end in Chromium, as people do it.

The lead picks the provider that converts; a bilingual annotator writes three reference
explanations (one in Chinese) and sets language and domain with the keyboard; each explanation
is converted by the real openai SDK against the fake LLM server (one reply cannot be read: the
lead sees the failure on the conversions page and retries it); a QC reviewer who did not write
the explanations sees image, explanation, the converted checklists and the automated checks'
flags, accepts one, edits one in the checklist widget and removes one with a reason; the
lead's release counts 1 removal by reason and stage, 1 accepted and 1 edited item.

No annotator page (HTML or the JSON its scripts fetch) ever names the converting provider or
its model. Screenshots at 1366x768 go to ``var/test-artifacts/`` (or CONCORD_TEST_ARTIFACTS).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotation.factories import ready
from candidates.models import Conversion
from candidates.services import provider_create
from core.models import JobStatus
from lib.tests.test_ocr import CJK_FONT, LATIN_FONT, make_meme
from projects.factories import project_with_members
from projects.imports import import_job_create, import_job_run
from projects.models import Item, Stage

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        CJK_FONT is None or LATIN_FONT is None,
        reason="needs a CJK and a Latin TrueType font (apt-get install fonts-wqy-microhei fonts-dejavu-core)",
    ),
]

ROOT = Path(__file__).resolve().parent.parent.parent
ARTIFACTS = Path(os.environ.get("CONCORD_TEST_ARTIFACTS", ROOT / "var" / "test-artifacts"))
VIEWPORT = {"width": 1366, "height": 768}

PROVIDER = "vikr-gpt-converter"
MODEL = "gpt-vikr-conv"
#: What an annotator page must never contain: the converter's name, its model, the served model.
SECRETS = (PROVIDER, MODEL, f"{MODEL}-served", "vikr-spare", "gpt-vikr-spare")

#: source id -> picture, caption lines, font, the explanation, language and domain keys (1-based
#: positions of the preset's choices: Chinese/English; ACG, Cross-domain, Daily life, ...).
MEMES = {
    "conan": {
        "picture": "astronaut",
        "caption": ("真相只有一个", "袜子去哪了"),
        "font": CJK_FONT,
        "explanation": (
            "图中戴眼镜、穿蓝色西装的男孩是《名侦探柯南》的江户川柯南，图上文字是“真相只有一个”和“袜子去哪了”。"
            "“真相只有一个”是柯南破案时的口头禅，这里被用在找不到袜子这种小事上，庄重与琐碎形成反差。"
        ),
        "language": 1,  # Chinese
        "domain": 1,  # ACG
        "values": ("Chinese", "ACG"),
    },
    "doge": {
        "picture": "chelsea",
        "caption": ("SUCH CAT", "VERY WOW"),
        "font": LATIN_FONT,
        "explanation": (
            "A tabby cat looks sideways; the caption reads 'such cat, very wow'. The broken English is "
            "Doge-speak, from the 2013 Doge meme of the Shiba Inu Kabosu. The joke is a cat claiming the "
            "dog's meme."
        ),
        "language": 2,  # English
        "domain": 2,  # Cross-domain
        "values": ("English", "Cross-domain"),
    },
    "coffee": {
        "picture": "coffee",
        "caption": ("MONDAY", "AGAIN"),
        "font": LATIN_FONT,
        "explanation": (
            "A cup of coffee with latte art and the words 'Monday again'. Monday is the weekly complaint "
            "of office workers; the poster needs coffee to face it."
        ),
        "language": 2,
        "domain": 3,  # Daily life
        "values": ("English", "Daily life"),
    },
}

CONAN_REPLY = {
    "visual": [
        {"id": "V1", "text": "一个戴眼镜、穿蓝色西装的男孩"},
        {"id": "V2", "text": "图上文字：真相只有一个；袜子去哪了"},
    ],
    "identity": [{"id": "I1", "text": "男孩是《名侦探柯南》中的江户川柯南", "link": "V1"}],
    "knowledge": [{"id": "K1", "text": "“真相只有一个”是柯南破案时的口头禅"}],
    "reasoning": [{"id": "R1", "text": "把破案的庄重口头禅用在找袜子这种小事上，形成反差"}],
    "entities": [{"id": "I1", "names": ["江户川柯南", "柯南"], "work": "名侦探柯南"}],
}
DOGE_REPLY = {
    "visual": [
        {"id": "V1", "text": "A Doge-like tabby cat looking sideways"},  # names the entity: flagged
        {"id": "V2", "text": "Caption: 'SUCH CAT' and 'VERY WOW'"},
    ],
    "identity": [
        {"id": "I1", "text": "The pose and the caption are those of Doge (Kabosu the Shiba Inu)", "link": "V1"}
    ],
    "knowledge": [{"id": "K1", "text": "Doge-speak pairs 'such' and 'very' with single words"}],
    "reasoning": [{"id": "R1", "text": "A cat takes over a famous dog meme: incongruity"}],
    "entities": [{"id": "I1", "names": ["Doge", "Kabosu"], "work": "Doge meme"}],
}
COFFEE_REPLY = {
    "visual": [{"id": "V1", "text": "A cup of coffee with latte art"}, {"id": "V2", "text": "Caption: 'MONDAY AGAIN'"}],
    "identity": [{"id": "I1", "text": "The cup is the poster's Monday coffee", "link": "V1"}],
    "knowledge": [{"id": "K1", "text": "Monday is the stock complaint of office workers"}],
    "reasoning": [{"id": "R1", "text": "Relatable exaggeration of needing coffee to face Monday"}],
}


def vikr_reply(text: str) -> dict:
    """The fake model's conversion of the explanation in the prompt."""
    if "柯南" in text:
        return CONAN_REPLY
    if "Doge" in text:
        return DOGE_REPLY
    return COFFEE_REPLY


def _import(project, tmp_path) -> None:
    from skimage import data

    folder = tmp_path / "src"
    folder.mkdir()
    rows = []
    for sid, m in MEMES.items():
        img = make_meme(getattr(data, m["picture"])(), *m["caption"], font_path=m["font"]).image
        img.save(folder / f"{sid}.png", format="PNG")
        rows.append({"image": f"{sid}.png", "text": " ".join(m["caption"]), "source_id": sid, "source_dataset": "test"})
    (folder / "manifest.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    job = import_job_run(job=import_job_create(project=project, user=None, source_name="test"), path=folder)
    assert job.imported == len(MEMES), job.errors


class Watch:
    """Every HTML/JSON answer an annotator's browser receives, checked for the secrets."""

    def __init__(self, pg, base: str):
        self.seen: list[str] = []
        self.leaks: list[str] = []

        def on_response(response):
            if not response.url.startswith(base) or "/static/" in response.url:
                return
            kind = response.headers.get("content-type", "")
            if not ("html" in kind or "json" in kind):
                return
            try:
                body = response.text()
            except Exception:  # a redirect has no body
                return
            self.seen.append(f"{kind.split(';')[0]} {response.url}")
            self.leaks += [f"{secret} in {response.url}" for secret in SECRETS if secret in body]

        pg.on("response", on_response)

    def check(self, pg) -> None:
        html = pg.content()
        self.leaks += [f"{secret} in the page at {pg.url}" for secret in SECRETS if secret in html]
        assert not self.leaks, self.leaks


#: axe-core, where the accessibility suite (tests/test_browser_a11y.py) installed it.
AXE_JS = Path(os.environ.get("CONCORD_AXE_JS") or ROOT / "var/test-cache/axe/node_modules/axe-core/axe.min.js")


def _axe(pg, name: str) -> None:
    """No serious or critical axe-core violation on the page (when axe-core is installed)."""
    if not AXE_JS.is_file():
        return
    from tests.test_browser_a11y import serious

    found = serious(pg, AXE_JS)
    (ARTIFACTS / f"vikr-axe-{name}.json").write_text(json.dumps(found, indent=1))
    assert found == {}, (name, found)


def _page_for(chromium_browser, browser_login, user):
    ctx = chromium_browser.new_context(viewport=VIEWPORT, locale="zh-CN", bypass_csp=AXE_JS.is_file())
    pg = ctx.new_page()
    pg.console_errors = []
    pg.on("console", lambda m: pg.console_errors.append(m.text) if m.type == "error" else None)
    browser_login(user, pg=pg)
    return ctx, pg


def _item_id(pg) -> int | None:
    last = pg.url.rstrip("/").split("/")[-1]
    return int(last) if last.isdigit() else None


def _next(pg, base) -> bool:
    pg.goto(f"{base}/annotate/")
    pg.click("#next-btn")
    pg.wait_for_load_state()
    if _item_id(pg) is not None and "/annotate/" in pg.url:
        pg.wait_for_selector("#workspace.ready")
        return True
    return False


def _after_submit(pg) -> bool:
    """True when the next item opened after a submission (False: back on the home page)."""
    pg.wait_for_load_state()
    if _item_id(pg) is None:
        return False
    pg.wait_for_selector("#workspace.ready")
    return True


def _shot(pg, name: str, *, full_page: bool = False) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}-1366x768.png"
    pg.screenshot(path=str(path), full_page=full_page)
    return path


def _cjk_fonts_used(pg, selector: str) -> list[dict]:
    """The platform fonts Chromium drew the element's text with (DevTools protocol), which must
    include a CJK font covering the Han characters: no missing-glyph boxes."""
    cdp = pg.context.new_cdp_session(pg)
    try:
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument")["root"]["nodeId"]
        node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    finally:
        cdp.detach()
    text = pg.inner_text(selector)
    han = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    cjk = [f for f in fonts if any(k in f["familyName"] for k in ("WenQuanYi", "CJK", "Droid Sans Fallback"))]
    assert han and sum(f["glyphCount"] for f in cjk) >= han, (selector, fonts, han)
    return fonts


def test_vikr_construction_in_the_browser(
    chromium_browser, browser_login, live_server, lead, make_user, tmp_path, fake_llm, api_keys
):
    fake_llm.reply_for = vikr_reply
    writer, checker = make_user("writer"), make_user("checker")
    project = project_with_members("vk", preset="vikr", lead=[lead], annotator=[writer, checker])
    for u in (writer, checker):
        ready(u, project)
    _import(project, tmp_path)
    # Two enabled providers: the stage must name the one that converts (the lead picks it).
    provider_create(
        project=project,
        name=PROVIDER,
        kind="openai",
        model=MODEL,
        base_url=f"{fake_llm.url}/v1",
        api_key_env="CONCORD_TEST_OPENAI_KEY",
        requests_per_minute=6000,
        timeout_seconds=5,
    )
    provider_create(
        project=project,
        name="vikr-spare",
        kind="openai",
        model="gpt-vikr-spare",
        base_url=f"{fake_llm.url}/v1",
        api_key_env="CONCORD_TEST_OPENAI_KEY",
    )
    # The third conversion's reply holds no JSON: it fails until the lead retries it.
    fake_llm.plan(MODEL, ["ok", "ok", "prose"])
    base = f"{live_server.url}/p/{project.slug}"

    # The lead starts annotation (no candidates in VIKR) and picks the converting provider.
    lctx, lp = _page_for(chromium_browser, browser_login, lead)
    lp.goto(f"{base}/candidates/")
    lp.click("#skip-button")
    assert Item.objects.filter(project=project, stage=Stage.ANNOTATING).count() == 3
    lp.goto(f"{base}/")
    lp.click("#link-conversions")
    expect(lp.locator("#conversion-conversion")).to_contain_text("Conversion into VIKR checklists")
    lp.select_option("#provider-conversion", PROVIDER)
    with lp.expect_navigation():
        lp.click("#provider-form-conversion button[type=submit]")
    expect(lp.locator(".messages")).to_contain_text("converting provider is saved")
    project.refresh_from_db()
    assert project.get_workflow().stage(1).model["provider"] == PROVIDER

    # Stage 1: the bilingual annotator writes the explanations; language and domain by keyboard.
    wctx, wp = _page_for(chromium_browser, browser_login, writer)
    wwatch = Watch(wp, live_server.url)
    written: dict[str, int] = {}
    assert _next(wp, base)
    while True:
        item = Item.objects.get(pk=_item_id(wp))
        m = MEMES[item.source_id]
        expect(wp.locator("#stage-badge")).to_have_text("Reference explanation")
        assert wp.locator("#review-checks").count() == 0 and wp.locator(".earlier-stage").count() == 0
        wp.fill("#field-explanation textarea", m["explanation"])
        wp.keyboard.press("Escape")  # leave the text box: the keys act on fields again
        wp.keyboard.press("n")  # -> language
        wp.keyboard.press(str(m["language"]))  # a single choice moves on to domain
        wp.keyboard.press(str(m["domain"]))
        language, domain = m["values"]
        expect(wp.locator(f"#field-language input[value='{language}']")).to_be_checked()
        expect(wp.locator(f"#field-domain input[value='{domain}']")).to_be_checked()
        if item.source_id == "conan":
            expect(wp.locator("#item-text")).to_contain_text("真相只有一个")
            _cjk_fonts_used(wp, "#item-text")
            _shot(wp, "vikr-reference-zh")
            _axe(wp, "reference")
        wwatch.check(wp)
        assert item.source_id not in written
        written[item.source_id] = item.pk
        with wp.expect_navigation(url="**/annotate/**"):
            wp.keyboard.press("Control+Enter")  # then the next item opens, or the home page
        if not _after_submit(wp):
            break
    assert set(written) == set(MEMES)
    # The writer is never handed their own items for QC.
    assert not _next(wp, base)
    wwatch.check(wp)
    assert any(u.startswith("application/json") for u in wwatch.seen), wwatch.seen
    wctx.close()

    # The conversions ran (eager Celery in the live server's request): two done, one failed.
    by_sid = {c.item.source_id: c for c in Conversion.objects.select_related("item")}
    assert by_sid["coffee"].status == JobStatus.FAILED and by_sid["conan"].status == JobStatus.DONE
    assert [f["check"] for f in by_sid["doge"].flags] == ["entity_in_visual"]
    sent = fake_llm.for_model(MODEL)
    assert len(sent) == 3 and all(r.image_bytes for r in sent)
    assert any(MEMES["conan"]["explanation"] in r.user_text for r in sent)

    # The lead follows the progress (the failed conversion's item waits in the model stage),
    # sees the failure with its reason and retries it.
    lp.goto(f"{base}/")
    expect(lp.locator("#workflow-stage-counts")).to_have_text(
        "In annotation, by round: Reference explanation 0 · Conversion into VIKR checklists (LLM) 1 · Quality control 2"
    )
    lp.goto(f"{base}/conversions/")
    counts = lp.locator("#conversion-counts-conversion")
    expect(counts).to_contain_text("2 converted")
    expect(counts).to_contain_text("1 with flags")
    expect(counts).to_contain_text("1 failed")
    failure = lp.locator(f"#conversion-failures tr[data-item='{written['coffee']}']")
    expect(failure).to_contain_text("could not be read")
    expect(failure).to_contain_text(PROVIDER)
    expect(lp.locator(f"#conversion-flags tr[data-item='{written['doge']}']")).to_contain_text("Doge")
    _shot(lp, "vikr-conversions-failed", full_page=True)
    _axe(lp, "conversions")
    with lp.expect_navigation():
        lp.click("#retry-failed")
    expect(lp.locator(".messages")).to_contain_text("1 conversion queued again")
    lp.goto(f"{base}/conversions/")
    expect(counts).to_contain_text("3 converted")
    expect(counts).to_contain_text("0 failed")
    assert lp.locator("#conversion-failures").count() == 0

    # Stage 3: the QC reviewer accepts, edits and removes.
    cctx, cp = _page_for(chromium_browser, browser_login, checker)
    cwatch = Watch(cp, live_server.url)
    reviewed = []
    assert _next(cp, base)
    while True:
        item = Item.objects.get(pk=_item_id(cp))
        sid = item.source_id
        assert sid not in reviewed
        reviewed.append(sid)
        expect(cp.locator("#stage-badge")).to_have_text("Quality control")
        # The image, the explanation as written, the converted checklists and the checks.
        assert cp.evaluate("document.getElementById('item-image').naturalWidth") > 0
        expect(cp.locator(".earlier-stage")).to_contain_text(MEMES[sid]["explanation"])
        expect(cp.locator(".earlier-stage")).to_contain_text(MEMES[sid]["values"][1])
        reply = vikr_reply(MEMES[sid]["explanation"])
        for layer, letter in (("visual", "V"), ("identity", "I"), ("knowledge", "K"), ("reasoning", "R")):
            first = cp.get_by_label(f"{layer.capitalize()} ({letter}) item {letter}1")
            expect(first).to_have_value(reply[layer][0]["text"])
        expect(cp.get_by_label("Item I1 refers to")).to_have_value("V1")
        if sid == "conan":  # accepted as converted
            expect(cp.locator("#review-checks-clean")).to_be_visible()
            _cjk_fonts_used(cp, ".earlier-stage .earlier-value")
            cp.locator("#field-visual").scroll_into_view_if_needed()
            _shot(cp, "vikr-qc-zh")
            _shot(cp, "vikr-qc-zh-full", full_page=True)
            _axe(cp, "qc")
            with cp.expect_navigation(url="**/annotate/**"):
                cp.click("#submit-btn")
        elif sid == "doge":  # the flag shown, the reviewer edits Visual in the widget
            flag = cp.locator(".review-flag[data-check=entity_in_visual]")
            expect(flag).to_contain_text("Visual (V)")
            expect(flag).to_contain_text("Doge")
            cp.get_by_label("Visual (V) item V1").fill("A tabby cat looking sideways with raised brows")
            cp.click("#field-visual [data-row-add]")
            cp.get_by_label("Visual (V) item V3").fill("The cat's mouth is closed in a smug line")
            _shot(cp, "vikr-qc-edit")
            with cp.expect_navigation(url="**/annotate/**"):
                cp.click("#submit-btn")
        else:  # removed with a reason
            cp.click("#flag-card summary")
            expect(cp.locator("#flag-card summary")).to_have_text("Remove this item")
            cp.check("input[name=reason][value=ambiguity]")
            cp.fill("#flag-note", "could be about any weekday")
            with cp.expect_navigation():
                cp.click("#flag-btn")
            expect(cp.locator(".messages")).to_contain_text("flagged")
        cwatch.check(cp)
        if _item_id(cp) is None:  # the home page (after a removal, or nothing left)
            if not _next(cp, base):
                break
        else:
            cp.wait_for_selector("#workspace.ready")
    assert sorted(reviewed) == sorted(MEMES)
    cwatch.check(cp)
    # The checker's browser fetched JSON (draft saves of the edited checklists) and it was checked.
    assert any(u.startswith("application/json") for u in cwatch.seen), cwatch.seen
    cctx.close()
    removed = Item.objects.get(pk=written["coffee"])
    assert removed.stage == Stage.EXCLUDED and removed.excluded_reason.startswith("ambiguity")

    # The lead builds a release: the datasheet and the manifest count the construction.
    lp.goto(f"{base}/releases/")
    lp.click("#build-release")
    lp.goto(f"{base}/releases/v1/")
    readme = lp.locator("#readme")
    expect(readme).to_contain_text("Construction: 3 candidate items, 1 removed, 2 kept")
    expect(readme).to_contain_text("1 was accepted as converted by the model and 1 edited by the reviewer")
    expect(readme).to_contain_text("| qc | ambiguity | 1 |")
    expect(readme).to_contain_text(f"conversion: {PROVIDER} ({MODEL}-served): 3")
    # The screenshot shows the construction counts of the datasheet.
    lp.evaluate(
        """() => {
          const pre = document.getElementById('readme');
          const at = pre.textContent.indexOf('Construction:');
          const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
          let seen = 0, node;
          while ((node = walker.nextNode())) {
            if (seen + node.length > at) {
              const r = document.createRange(); r.setStart(node, at - seen); r.setEnd(node, at - seen + 1);
              pre.scrollIntoView();
              pre.scrollTop += r.getBoundingClientRect().top - pre.getBoundingClientRect().top - 160;
              return;
            }
            seen += node.length;
          }
        }"""
    )
    _shot(lp, "vikr-release")
    from exports.models import Release
    from exports.selectors import release_dir

    release = Release.objects.get(project=project, number=1)
    c = release.manifest["construction"]
    assert (c["items"], c["removed"], c["kept"]) == (3, 1, 2)
    assert c["removed_by_reason"] == {"ambiguity": 1} and c["removed_by_stage"] == {"qc": {"ambiguity": 1}}
    assert (c["reviewed_accepted"], c["reviewed_edited"]) == (1, 1) and c["reviewed_fields_edited"] == {"visual": 1}
    # Who converted is in the release (leads and researchers read it; annotators never did).
    assert c["converted_by"] == [{"stage": "conversion", "provider": PROVIDER, "model": f"{MODEL}-served", "items": 3}]
    raw = (release_dir(release) / "records.jsonl").read_text(encoding="utf-8")
    records = {r["item_id"]: r for r in map(json.loads, raw.splitlines())}
    assert set(records) == {written["conan"], written["doge"]}
    conan = records[written["conan"]]["gold"]
    assert conan["visual"] == [{**v, "link": None} for v in CONAN_REPLY["visual"]]
    assert conan["explanation"] == MEMES["conan"]["explanation"] and conan["language"] == "Chinese"
    assert "真相只有一个" in raw  # CJK written as itself
    doge = records[written["doge"]]["gold"]
    assert [v["text"] for v in doge["visual"]] == [
        "A tabby cat looking sideways with raised brows",
        "Caption: 'SUCH CAT' and 'VERY WOW'",
        "The cat's mouth is closed in a smug line",
    ]
    assert doge["identity"][0]["link"] == "V1" and doge["domain"] == "Cross-domain"
    for pg in (lp, wp, cp):
        assert not pg.console_errors, pg.console_errors
    lctx.close()
