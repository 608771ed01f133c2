"""In Chromium: a lead judges a near-duplicate pair, builds release v1 and watches it finish; a
researcher sees the release without the lead's buttons."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from exports.models import ExportJob, NearDuplicatePair, Release
from exports.services import export_job_run, near_duplicates_detect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_lead_reviews_builds_and_researcher_reads(
    page, chromium_browser, browser_login, live_server, project, dup_gold, lead, researcher, monkeypatch
):
    near_duplicates_detect(project=project)
    queued: list[int] = []
    # No worker in this test: the build is queued, and the test plays the worker below.
    monkeypatch.setattr(
        "exports.tasks.export_job_task.apply_async", lambda args=(), kwargs=None, **options: queued.append(args[0])
    )

    browser_login(lead)
    page.goto(f"{live_server.url}/p/{project.slug}/")
    page.click("#link-duplicates")
    cards = page.locator(".nd-pair")
    expect(cards).to_have_count(2)
    first = cards.first
    pair_id = int(first.get_attribute("id").removeprefix("pair-"))
    expect(first.locator(".nd-side:not(.nd-diff-side) img")).to_have_count(2)  # + the difference tile
    first.locator("button.mark-same").click()
    card = page.locator(f"#pair-{pair_id}")
    expect(card).to_have_attribute("data-status", "same")
    expect(card.locator(".nd-status")).to_have_text("Same meme")
    expect(card.locator("button.mark-same")).to_be_disabled()
    assert NearDuplicatePair.objects.get(pk=pair_id).status == "same"

    page.goto(f"{live_server.url}/p/{project.slug}/releases/")
    page.click("#build-release")
    job = ExportJob.objects.get()
    assert queued == [job.pk]
    job_card = page.locator(f"#job-release-{job.pk}")
    expect(job_card.locator(".job-bar")).to_be_visible()
    expect(job_card).to_have_attribute("data-status", "pending")
    release = export_job_run(job=job)  # the worker
    expect(job_card).to_have_attribute("data-status", "done", timeout=10_000)  # htmx polling
    expect(job_card.locator(".release-link")).to_have_text("v1")
    rows = job_card.locator(".file-row")
    expect(rows).to_have_count(len(release.manifest["files"]) + 1)
    records_row = job_card.locator('.file-row[data-name="records.jsonl"]')
    expect(records_row.locator(".sha")).to_have_text(release.manifest["files"]["records.jsonl"]["sha256"])
    assert page.console_errors == []

    context = chromium_browser.new_context()
    other = context.new_page()
    try:
        browser_login(researcher, pg=other)
        other.goto(f"{live_server.url}/p/{project.slug}/")
        expect(other.locator("#link-duplicates")).to_have_count(0)
        other.click("#link-releases")
        expect(other.locator(".release-row")).to_have_count(1)
        expect(other.locator("#build-release")).to_have_count(0)
        expect(other.locator(".job-release")).to_have_count(0)
        other.click("text=v1")
        expect(other.locator("#integrity")).to_have_text("passed")
        expect(other.locator('.file-row[data-name="manifest.json"] .sha')).to_have_text(release.manifest_sha256)
        other.goto(f"{live_server.url}/p/{project.slug}/duplicates/")
        expect(other.locator("body")).to_contain_text("Forbidden")
    finally:
        context.close()
    assert Release.objects.count() == 1
