"""In Chromium: a lead submits two models' explanations on a VIKR release through the page,
has two replay judges score each one with the judge form, and reads V, I, K, R, Success and
3-of-4 (with CIs and n) on the leaderboard, each judge's own board, and a submission's page;
no CSP violation."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from evaluation.demo import VIKR_JUDGES, VIKR_MODELS, vikr_demo_judges, vikr_demo_material
from evaluation.models import Submission

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_lead_scores_two_models_with_two_replay_judges(page, browser_login, live_server, vikr_release, lead, tmp_path):
    rows_by_model, replay_lines = vikr_demo_material(release=vikr_release, split="train")
    vikr_demo_judges(project=vikr_release.project, replay_lines=replay_lines)
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    browser_login(lead)
    board_url = f"{live_server.url}/p/vk/releases/v{vikr_release.number}/leaderboard/?split=train"
    for model, rows in rows_by_model.items():
        path = tmp_path / f"{model.split()[0]}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        page.goto(board_url)
        page.fill("#submit-form input[name=model_name]", model)
        page.set_input_files("#submit-form input[name=file]", str(path))
        page.click("#submit-form button[type=submit]")
        expect(page.locator("h1")).to_have_text(model)
        expect(page.locator("#judging")).to_contain_text("Awaiting the judges")

    for model in VIKR_MODELS:
        page.goto(board_url)
        page.select_option("#judge-form select[name=submission]", label=f"{model} (awaiting judges)")
        page.select_option("#judge-form select[name=judge_1]", label=f"{VIKR_JUDGES[0]} ({VIKR_JUDGES[0]})")
        page.select_option("#judge-form select[name=judge_2]", label=f"{VIKR_JUDGES[1]} ({VIKR_JUDGES[1]})")
        page.click("#judge-form button[type=submit]")
        expect(page.locator(".job-judging").first).to_have_attribute("data-status", "done", timeout=30_000)

    page.goto(board_url)
    headers = page.locator("#board thead th[data-key]")
    expect(headers).to_have_text(
        ["Visual (V)", "Identity (I)", "Knowledge (K)", "Reasoning (R)", "Success ★", "3 of 4 layers"]
    )
    subs = {s.model_name: s for s in Submission.objects.all()}
    first = page.locator("#board tbody tr").first
    expect(first.locator("th[scope=row]")).to_contain_text(VIKR_MODELS[0])  # ranked by Success
    for sub in subs.values():
        row = page.locator(f"#board tbody tr[data-submission='{sub.pk}']")
        cells = row.locator("td.fig")
        figs = sub.scores["figures"]
        for j, key in enumerate(["V", "I", "K", "R", "success", "success_3of4"]):
            expect(cells.nth(j).locator(".v")).to_have_text(f"{100 * figs[key]['value']:.2f}")
            expect(cells.nth(j).locator(".n")).to_have_text(f"n={figs[key]['n']}")
        expect(cells.nth(4).locator(".ci")).to_have_text(
            f"[{100 * figs['success']['ci'][0]:.2f}, {100 * figs['success']['ci'][1]:.2f}]"
        )
    thorough = subs[VIKR_MODELS[0]].scores["figures"]
    assert thorough["success"]["value"] < thorough["judge1.success"]["value"]  # judge B is stricter
    board1 = page.locator("table.judge-board[data-slot='1']")
    expect(board1.locator(f"tr[data-submission='{subs[VIKR_MODELS[0]].pk}'] td.fig").nth(4).locator(".v")).to_have_text(
        f"{100 * thorough['judge1.success']['value']:.2f}"
    )
    expect(page.locator("#judge-spearman")).to_contain_text("2 judged submission(s)")

    page.click(f"#board tbody tr[data-submission='{subs[VIKR_MODELS[0]].pk}'] th a")
    expect(page.locator("#judging")).to_contain_text(VIKR_JUDGES[1])
    expect(page.locator("h3", has_text="By gold.language")).to_be_visible()
    expect(page.locator("#calibration-form")).to_be_visible()
    page.screenshot(path=str(tmp_path / "vikr-submission.png"), full_page=True)
    assert not [p for p in problems if "Content Security Policy" in p or "Refused" in p], problems
