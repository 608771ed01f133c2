"""axe-core on the main pages (no serious or critical violation), and screenshots of the
annotation, audit and review pages at 1366x768 and 1920x1080.

axe-core comes from npm (``npm install axe-core`` into ``var/test-cache/axe``, once; or set
CONCORD_AXE_JS to an ``axe.min.js``), injected into a browser context that bypasses the CSP.
Screenshots and the axe results go to ``var/test-artifacts/`` (or CONCORD_TEST_ARTIFACTS).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

from adjudication.models import AdjudicationTask
from annotation.factories import MEME3W_HARMFUL, claim, items_open, ready
from annotation.services import annotation_audit_assign
from annotation.tests.test_submit import CANDIDATE_REPLIES
from candidates.factories import candidates_create
from conftest import require
from workflow.services import annotation_submit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parent.parent
AXE_VERSION = "4.14.1"
ARTIFACTS = Path(os.environ.get("CONCORD_TEST_ARTIFACTS", ROOT / "var" / "test-artifacts"))
SIZES = [(1366, 768), (1920, 1080)]


@pytest.fixture(scope="session")
def axe_js() -> Path:
    given = os.environ.get("CONCORD_AXE_JS")
    if given:
        require(Path(given).is_file(), f"CONCORD_AXE_JS={given} is not a file")
        return Path(given)
    folder = ROOT / "var" / "test-cache" / "axe"
    path = folder / "node_modules" / "axe-core" / "axe.min.js"
    if not path.exists():
        require(shutil.which("npm") is not None, "npm not found (needed once to install axe-core)")
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--silent", f"axe-core@{AXE_VERSION}"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=300,
        )
        require(done.returncode == 0 and path.exists(), f"npm install axe-core failed: {done.stderr[-300:]}")
    return path


def serious(pg, axe_js) -> dict[str, list[str]]:
    pg.add_script_tag(path=str(axe_js))
    result = pg.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return {
        f"{v['id']} ({v['impact']})": [" ".join(map(str, n["target"])) for n in v["nodes"][:5]]
        for v in result["violations"]
        if v.get("impact") in ("serious", "critical")
    }


@pytest.fixture
def scene(project, tmp_path, annotator_a, annotator_b, reviewer, auditor, lead):
    """An item with candidates for annotator A, an adjudication task (A and B disagree) with a
    decided one for the reviewer's list, an audit item, and near-duplicate pairs."""
    from adjudication.services import adjudication_next, gold_decide
    from exports.services import near_duplicates_detect
    from projects.factories import items_create

    texts = [
        "When the people from Planet Zorg land and immediately ask for the wifi password",
        "Zorgians at the wifi desk",
        "عندما يصل سكان كوكب زورغ يسألون عن كلمة سر الواي فاي",
        "People from Planet Zorg, again",
    ]
    items = items_create(project, tmp_path / "scene", 4, texts=texts)
    items_open(items)
    for it in items:
        candidates_create(it, CANDIDATE_REPLIES)
    for user in (annotator_a, annotator_b):
        ready(user, project)
    # Two disagreements: one decided (for "my decisions"), one left open.
    for _ in range(2):
        a = claim(annotator_a, project)
        annotation_submit(
            annotator=annotator_a, item=a.item, values={**MEME3W_HARMFUL, "text_mention": None}, version=a.version
        )
        b = claim(annotator_b, project)
        assert b.item_id == a.item_id
        annotation_submit(
            annotator=annotator_b,
            item=b.item,
            version=b.version,
            values={**MEME3W_HARMFUL, "text_mention": None, "target_category": "gender", "visual_region": []},
        )
    first = adjudication_next(project=project, reviewer=reviewer)
    gold_decide(
        task=first,
        reviewer=reviewer,
        decisions={"target_category": {"pick": 2}, "visual_region": {"pick": 1}},
        note="B's category",
        version=first.version,
    )
    open_task = AdjudicationTask.objects.get(status="open")
    mine = claim(annotator_a, project)
    ready(auditor, project)
    annotation_audit_assign(auditor=auditor, item=items[3])
    near_duplicates_detect(project=project)
    return {"annotation": mine, "task": open_task, "audit_item": items[3]}


def _page(chromium_browser, browser_login, user, size=(1366, 768)):
    ctx = chromium_browser.new_context(bypass_csp=True, viewport={"width": size[0], "height": size[1]})
    pg = ctx.new_page()
    errors = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    browser_login(user, pg=pg)
    return ctx, pg, errors


def test_main_pages_have_no_serious_axe_violations(
    chromium_browser, browser_login, live_server, project, scene, annotator_a, reviewer, auditor, lead, axe_js
):
    base = f"{live_server.url}/p/{project.slug}"
    checks = []  # (label, user, url, prepare)

    def harmful(pg):
        pg.keyboard.press("1")
        pg.wait_for_selector("#field-visual_region:not([hidden])")

    def keys_open(pg):
        pg.keyboard.press("?")
        expect(pg.locator("#keys-help")).to_be_visible()

    checks += [
        ("annotation workspace", annotator_a, f"{base}/annotate/{scene['annotation'].item_id}/", None),
        (
            "annotation workspace, harmful (every field)",
            annotator_a,
            f"{base}/annotate/{scene['annotation'].item_id}/",
            harmful,
        ),
        (
            "annotation workspace, keys dialog",
            annotator_a,
            f"{base}/annotate/{scene['annotation'].item_id}/",
            keys_open,
        ),
        ("annotation home", annotator_a, f"{base}/annotate/", None),
        ("audit workspace", auditor, f"{base}/audit/{scene['audit_item'].pk}/", harmful),
        ("audit home", auditor, f"{base}/audit/", None),
        ("review task", reviewer, f"{base}/review/{scene['task'].pk}/", None),
        ("review home (my decisions)", reviewer, f"{base}/review/", None),
        ("near-duplicate review", reviewer, f"{base}/duplicates/", None),
        ("lead: quality dashboard", lead, f"{base}/quality/", None),
        ("lead: releases", lead, f"{base}/releases/", None),
        ("forbidden (403)", lead, f"{base}/review/999999/", None),
        ("not found (404)", lead, f"{base}/items/999999/history", None),
    ]
    results, contexts = {}, {}
    try:
        for label, user, url, prepare in checks:
            if user.pk not in contexts:
                contexts[user.pk] = _page(chromium_browser, browser_login, user)
            _, pg, _ = contexts[user.pk]
            pg.goto(url)
            pg.wait_for_load_state("networkidle")
            if (
                "/annotate/" in url
                and url.rstrip("/")[-1].isdigit()
                or "/audit/" in url
                and url.rstrip("/")[-1].isdigit()
            ):
                pg.wait_for_selector("#workspace.ready")
            if "/review/" in url and url.rstrip("/")[-1].isdigit() and "999999" not in url:
                pg.wait_for_selector("#review[data-ready]")
            if prepare:
                prepare(pg)
            results[label] = serious(pg, axe_js)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "axe-serious-critical.json").write_text(
            json.dumps({"axe_version": AXE_VERSION, "pages": results}, indent=2, ensure_ascii=False)
        )
        bad = {label: r for label, r in results.items() if r}
        assert not bad, f"serious/critical axe violations: {json.dumps(bad, indent=1)}"
        for _, _, errors in contexts.values():
            # The 403 and 404 pages are loaded on purpose.
            assert [e for e in errors if "status of 404" not in e and "status of 403" not in e] == []
    finally:
        for ctx, _, _ in contexts.values():
            ctx.close()


def test_screenshots_at_two_sizes_and_the_text_stays_in_view(
    chromium_browser, browser_login, live_server, project, scene, annotator_a, reviewer, auditor
):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    base = f"{live_server.url}/p/{project.slug}"
    pages = [
        ("annotation", annotator_a, f"{base}/annotate/{scene['annotation'].item_id}/", "#workspace.ready"),
        ("audit", auditor, f"{base}/audit/{scene['audit_item'].pk}/", "#workspace.ready"),
        ("review", reviewer, f"{base}/review/{scene['task'].pk}/", "#review[data-ready]"),
    ]
    for name, user, url, ready_sel in pages:
        for w, h in SIZES:
            ctx, pg, errors = _page(chromium_browser, browser_login, user, (w, h))
            try:
                pg.goto(url)
                pg.wait_for_selector(ready_sel)
                if name != "review":
                    # 1 picks the label's first choice (harmful), which shows the target fields.
                    # (Shift+A took candidate A whole, but the candidates' letters are shuffled
                    # per annotator: A was sometimes the non-harmful one.)
                    key = "1"
                    pg.keyboard.press(key)
                    try:
                        pg.wait_for_selector("#field-visual_region:not([hidden])", timeout=15000)
                    except PlaywrightTimeoutError:  # say what the page was doing (seen once in CI)
                        state = pg.evaluate(
                            "() => ({active: document.activeElement && document.activeElement.outerHTML.slice(0, 300),"
                            " live: [...document.querySelectorAll('[aria-live]')].map((e) => e.textContent).join(' | '),"
                            " ws: document.getElementById('workspace').className})"
                        )
                        pytest.fail(f"{name} {w}x{h}: {key} did not show the region field; page state {state}")
                pg.screenshot(path=str(ARTIFACTS / f"{name}-{w}x{h}.png"))
                # Scroll the form to its end: the image and the item text stay in the viewport.
                pg.locator(".ws-right").evaluate("el => el.scrollTo(0, el.scrollHeight)")
                pg.mouse.wheel(0, 2000)
                pg.wait_for_timeout(100)
                for sel in ("#item-image", "#item-text"):
                    box = pg.locator(sel).bounding_box()
                    assert box and box["y"] >= 0 and box["y"] + min(box["height"], 40) <= h, (name, w, h, sel, box)
                pg.screenshot(path=str(ARTIFACTS / f"{name}-{w}x{h}-scrolled.png"))
                assert errors == []
            finally:
                ctx.close()
