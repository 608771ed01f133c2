"""In Chromium: a researcher submits predictions through the page, reads the scores, sorts the
leaderboard by clicking column headers (htmx) and compares two submissions; no CSP violation."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from evaluation.tests.conftest import jsonl, records

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_researcher_submits_sorts_and_compares(page, browser_login, live_server, release, researcher, tmp_path):
    rows = records(release, "train")
    good = tmp_path / "oracle.jsonl"
    good.write_bytes(jsonl({"item_id": r["item_id"], **r["gold"]} for r in rows))
    lazy = tmp_path / "lazy.jsonl"
    lazy.write_bytes(jsonl({"item_id": r["item_id"], "label": "harmful"} for r in rows))
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)

    browser_login(researcher)
    board_url = f"{live_server.url}/p/p1/releases/v1/leaderboard/?split=train"
    for name, path in (("Oracle", good), ("Always harmful", lazy)):
        page.goto(board_url)
        page.fill("#submit-form input[name=model_name]", name)
        page.set_input_files("#submit-form input[name=file]", str(path))
        page.click("#submit-form button[type=submit]")
        expect(page.locator("h1")).to_have_text(name)
        expect(page.locator("#counts")).to_contain_text("0 missing")
        expect(page.locator(".worst")).to_have_count(0)  # gold beside predictions: leads only

    page.goto(board_url)
    first_model = page.locator("#board tbody tr th[scope=row]").first
    expect(first_model).to_have_text("Oracle")  # by JRA, best first
    page.click("#board th[data-key='label.acc'] a")
    expect(page.locator("#board th[data-key='label.acc']")).to_have_attribute("aria-sort", "descending")
    page.click("#board th[data-key='label.acc'] a")
    expect(page.locator("#board th[data-key='label.acc']")).to_have_attribute("aria-sort", "ascending")
    expect(page.locator("#board tbody tr th[scope=row]").first).to_have_text("Always harmful")
    assert "sort=label.acc" in page.url and "dir=asc" in page.url

    page.select_option("#compare-form select[name=a]", label="Oracle")
    page.select_option("#compare-form select[name=b]", label="Always harmful")
    page.click("#compare-form button[type=submit]")
    expect(page.locator("#comparison tr[data-key='label.acc'] td").first).to_contain_text("+")
    assert not [p for p in problems if "Content Security Policy" in p or "Refused" in p], problems
