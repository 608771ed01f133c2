"""In Chromium: a lead fills the card and datasheet settings (a wrong license id is refused
with the reason next to the field), then pushes a release to the Hub from its page and
watches the job finish with the commit link (a local stand-in for the Hub)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from exports.models import HubPush, ReleaseSettings
from exports.services import export_job_run, export_job_start, hub_push_run
from exports.tests.hub_stub import HubStub

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_lead_edits_the_card_and_pushes_to_the_hub(
    page, browser_login, live_server, project, dup_gold, lead, monkeypatch
):
    release = export_job_run(job=export_job_start(project=project, user=lead, enqueue=False))
    queued: list[int] = []
    monkeypatch.setattr(
        "exports.tasks.hub_push_task.apply_async", lambda args=(), kwargs=None, **options: queued.append(args[0])
    )
    browser_login(lead)
    page.goto(f"{live_server.url}/p/{project.slug}/releases/")
    page.click("#release-settings summary")
    page.fill("#rs-license", "Not a licence!")
    page.fill("#rs-creators", "Ada Lovelace (Analytical Engine Lab)")
    page.click("#save-release-settings")
    expect(page.locator("#rs-license-error")).to_be_visible()
    expect(page.locator("#rs-license")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#rs-creators")).to_have_value("Ada Lovelace (Analytical Engine Lab)")  # kept
    page.fill("#rs-license", "cc-by-4.0")
    page.fill("#rs-hub_repo", "zorg-lab/zorg-memes")
    page.click("#save-release-settings")
    expect(page.locator("body")).to_contain_text("Release settings saved")
    settings = ReleaseSettings.objects.get(project=project)
    assert settings.license == "cc-by-4.0" and settings.hub_repo == "zorg-lab/zorg-memes"

    with HubStub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", "hf_browser_test")
        page.goto(f"{live_server.url}/p/{project.slug}/releases/v{release.number}/")
        expect(page.locator("#download-archive")).to_be_visible()
        expect(page.locator("#hub-repo")).to_have_value("zorg-lab/zorg-memes")
        page.click("#push-to-hub")
        push = HubPush.objects.get()
        assert queued == [push.pk]
        card = page.locator(f"#job-hub-push-{push.pk}")
        expect(card).to_have_attribute("data-status", "pending")
        hub_push_run(push_id=push.pk)  # the worker
        expect(card).to_have_attribute("data-status", "done", timeout=10_000)
        expect(card.locator(".hub-commit")).to_contain_text(hub.url)
        assert len(hub.commits) == 1
    assert page.console_errors == []
