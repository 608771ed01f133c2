"""A lead adds a provider, generates candidates and watches the job page, in Chromium."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from candidates.factories import replay_file_write
from candidates.models import Candidate

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_lead_generates_candidates_and_sees_progress(page, browser_login, live_server, project, lead, items, settings):
    replay = settings.VAR_DIR / "answers.jsonl"
    replay.write_text(
        "".join(json.dumps({"source_id": it.source_id, "reply": {"label": "non-harmful"}}) + "\n" for it in items)
    )
    browser_login(lead)
    page.goto(f"{live_server.url}/p/{project.slug}/")
    page.click("text=providers")
    page.fill("#id_name", "replayer")
    page.select_option("#id_kind", "replay")
    page.fill("#id_model", "replay-model")
    page.set_input_files("#id_replay_upload", str(replay))
    page.click("text=Add provider")
    expect(page.locator("#providers")).to_contain_text("replayer")

    page.click("text=Generate candidates →")
    expect(page.locator("#new-count")).to_have_text(str(len(items)))
    page.click("#generate-button")
    page.wait_for_url("**/candidates/jobs/*/")
    expect(page.locator("#total-done")).to_have_text(str(len(items)))
    expect(page.locator("#job-status")).to_have_text("finished")
    expect(page.locator(".provider-progress .n-done")).to_have_text(str(len(items)))
    assert Candidate.objects.count() == len(items)
    assert page.console_errors == []


def test_job_page_updates_by_polling(page, browser_login, live_server, project, lead, items, settings):
    """The job page polls with htmx: counts change on screen as tasks finish elsewhere."""
    from candidates.models import CandidateTask
    from candidates.services import candidate_job_start, candidate_task_execute, provider_create

    name = replay_file_write(project, [{"source_id": it.source_id, "reply": {"label": "non-harmful"}} for it in items])
    provider_create(project=project, name="r", kind="replay", model="m", replay_file=name)
    job = candidate_job_start(project=project, user=lead, enqueue=False)  # as if the workers were busy
    browser_login(lead)
    page.goto(f"{live_server.url}/p/{project.slug}/candidates/jobs/{job.pk}/")
    expect(page.locator("#total-pending")).to_have_text(str(len(items)))
    expect(page.locator("#job-status")).to_have_text("running")
    for task in CandidateTask.objects.filter(job=job):
        candidate_task_execute(task_id=task.pk)
    expect(page.locator("#total-done")).to_have_text(str(len(items)), timeout=5000)
    expect(page.locator("#job-status")).to_have_text("finished")
    assert page.console_errors == []
