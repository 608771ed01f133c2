"""Jobs end to end with eager Celery and the real SDKs against the fake server."""

from __future__ import annotations

import pytest

from candidates.models import Candidate, CandidateJob, CandidateTask, Provider
from candidates.prompts import prompt_for_project
from candidates.selectors import job_progress
from candidates.services import (
    candidate_job_retry_failed,
    candidate_job_start,
    candidate_task_execute,
    items_start_annotation,
    parse_item_ids,
    provider_create,
    provider_set_enabled,
    provider_update,
)
from core.errors import ServiceError as ValidationError
from projects.models import Item, Stage

pytestmark = pytest.mark.django_db


def start(project, lead, capture, **kw):
    with capture(execute=True):
        return candidate_job_start(project=project, user=lead, **kw)


def test_job_generates_one_candidate_per_item_and_provider(
    project, lead, items, three_providers, fake_llm, django_capture_on_commit_callbacks
):
    job = start(project, lead, django_capture_on_commit_callbacks)
    job.refresh_from_db()
    assert job.status == CandidateJob.Status.DONE and job.finished_at
    assert Candidate.objects.count() == len(items) * 3
    assert len(fake_llm.requests) == len(items) * 3
    assert {r.kind for r in fake_llm.requests} == {"openai", "gemini"}
    cand = Candidate.objects.filter(provider__name="gpt").first()
    assert cand.fields["label"] == "harmful" and cand.fields["visual_region"] == [[100, 150, 600, 900]]
    assert cand.model_name == "gpt-test-served" and cand.prompt_tokens == 1200 and cand.completion_tokens == 80
    assert cand.latency_ms is not None and cand.think.startswith("Step 1")
    assert cand.prompt_version == prompt_for_project(project).version == job.prompt_version
    assert cand.raw_reply.startswith("{")
    assert set(Item.objects.filter(project=project).values_list("stage", flat=True)) == {Stage.ANNOTATING}
    progress = job_progress(job=job)
    assert [(p.provider_name, p.done, p.failed, p.pending) for p in progress.providers] == [
        ("gem", 4, 0, 0),
        ("gpt", 4, 0, 0),
        ("qwen", 4, 0, 0),
    ]


def test_rerun_for_the_same_items_sends_nothing_twice(
    project, lead, items, three_providers, fake_llm, django_capture_on_commit_callbacks
):
    start(project, lead, django_capture_on_commit_callbacks)
    n = len(fake_llm.requests)
    job2 = start(project, lead, django_capture_on_commit_callbacks, item_ids=[i.pk for i in items])
    assert len(fake_llm.requests) == n
    assert job2.status == CandidateJob.Status.DONE
    assert Candidate.objects.count() == len(items) * 3


def test_redelivered_task_does_not_duplicate(
    project, lead, items, three_providers, fake_llm, django_capture_on_commit_callbacks
):
    job = start(project, lead, django_capture_on_commit_callbacks, item_ids=[items[0].pk])
    task = CandidateTask.objects.filter(job=job).first()
    # A redelivery (acks_late after a crash) of a finished task: status guard.
    assert candidate_task_execute(task_id=task.pk).kind == "skipped"
    # Even if the status had been lost, the stored candidate is found and nothing is re-sent.
    CandidateTask.objects.filter(pk=task.pk).update(status=CandidateTask.Status.RUNNING)
    n = len(fake_llm.requests)
    assert candidate_task_execute(task_id=task.pk).kind == "done"
    assert len(fake_llm.requests) == n
    assert Candidate.objects.filter(item=items[0], provider=task.provider).count() == 1


def test_a_leased_task_is_not_run_twice_concurrently(
    project, lead, items, three_providers, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    job = candidate_job_start(project=project, user=lead, item_ids=[items[0].pk], enqueue=False)
    task = CandidateTask.objects.filter(job=job).first()
    CandidateTask.objects.filter(pk=task.pk).update(
        status="running", lease_until=timezone.now() + timedelta(seconds=30)
    )
    outcome = candidate_task_execute(task_id=task.pk)
    assert outcome.kind == "wait" and 25 < outcome.wait < 35
    assert not Candidate.objects.exists()


def test_transient_errors_retry_then_succeed(
    project, lead, items, three_providers, fake_llm, django_capture_on_commit_callbacks
):
    fake_llm.plan("gpt-test", ["429:0", "500", "503"])
    fake_llm.plan("gemini-test", ["500"])
    job = start(project, lead, django_capture_on_commit_callbacks, item_ids=[items[0].pk])
    assert Candidate.objects.count() == 3
    gpt_task = CandidateTask.objects.get(job=job, provider__name="gpt")
    assert gpt_task.status == "done" and gpt_task.attempts == 4
    assert len(fake_llm.for_model("gpt-test")) == 4


def test_retries_are_bounded_then_the_task_fails(
    project, lead, items, three_providers, fake_llm, django_capture_on_commit_callbacks
):
    from candidates.tasks import MAX_RETRIES

    fake_llm.plan("gpt-test", ["500"] * 50)
    job = start(project, lead, django_capture_on_commit_callbacks, item_ids=[items[0].pk])
    task = CandidateTask.objects.get(job=job, provider__name="gpt")
    assert task.status == "failed" and "gave up after" in task.error and "HTTP 500" in task.error
    assert len(fake_llm.for_model("gpt-test")) == MAX_RETRIES + 1
    job.refresh_from_db()
    assert job.status == "done"  # the other providers finished; the job is over
    # The job finished, so the item moves on even without the failed provider.
    assert Item.objects.get(pk=items[0].pk).stage == Stage.ANNOTATING


def test_auth_error_fails_at_once_and_does_not_block_other_providers(
    project, lead, items, three_providers, fake_llm, django_capture_on_commit_callbacks
):
    fake_llm.plan("gemini-test", ["401"] * 10)
    job = start(project, lead, django_capture_on_commit_callbacks)
    assert len(fake_llm.for_model("gemini-test")) == len(items)  # one call each, no retry
    progress = {p.provider_name: p for p in job_progress(job=job).providers}
    assert progress["gem"].failed == len(items) and progress["gpt"].done == len(items)
    assert Candidate.objects.filter(provider__name="gem").count() == 0


def test_retry_failed_requeues_and_completes(
    project, lead, items, three_providers, fake_llm, django_capture_on_commit_callbacks
):
    fake_llm.plan("gemini-test", ["401"] * len(items))
    job = start(project, lead, django_capture_on_commit_callbacks)
    assert job_progress(job=job).failed == len(items)
    with django_capture_on_commit_callbacks(execute=True):
        assert candidate_job_retry_failed(job=job) == len(items)
    job.refresh_from_db()
    assert job.status == "done" and job_progress(job=job).done == len(items) * 3


def test_unparseable_reply_is_kept_for_inspection_and_retry_replaces_it(
    project, lead, items, three_providers, fake_llm, django_capture_on_commit_callbacks
):
    fake_llm.plan("gpt-test", ["prose"])
    job = start(project, lead, django_capture_on_commit_callbacks, item_ids=[items[0].pk])
    bad = Candidate.objects.get(provider__name="gpt")
    assert bad.parse_error and bad.raw_reply == "I cannot help with that request." and bad.fields == {}
    assert CandidateTask.objects.get(job=job, provider__name="gpt").status == "failed"
    with django_capture_on_commit_callbacks(execute=True):
        candidate_job_retry_failed(job=job)
    good = Candidate.objects.get(provider__name="gpt")
    assert good.parse_error == "" and good.fields["label"] == "harmful"


def test_malformed_fields_are_stored_with_reasons(
    project, lead, items, three_providers, fake_llm, django_capture_on_commit_callbacks
):
    fake_llm.plan("gpt-test", ["extra_missing"])
    fake_llm.plan("gemini-test", ["bad_boxes"])
    fake_llm.plan("qwen-vl-test", ["fenced"])
    start(project, lead, django_capture_on_commit_callbacks, item_ids=[items[0].pk])
    gpt = Candidate.objects.get(provider__name="gpt")
    assert "target_entity" not in gpt.fields and gpt.fields["label"] == "harmful"
    assert {r["field"] for r in gpt.removed} >= {"target_entity", "text_mention", "confidence"}
    gem = Candidate.objects.get(provider__name="gem")
    assert gem.fields["visual_region"] == [[50, 60, 400, 700]]
    assert sum(r["field"] == "visual_region" for r in gem.removed) == 2
    qwen = Candidate.objects.get(provider__name="qwen")
    assert qwen.fields["target_entity"] == "people from Planet Zorg" and qwen.removed == []


def test_item_moves_to_annotating_only_with_all_enabled_providers(project, lead, items, three_providers, fake_llm):
    job = candidate_job_start(project=project, user=lead, item_ids=[items[0].pk], enqueue=False)
    tasks = list(CandidateTask.objects.filter(job=job).order_by("provider__name"))
    candidate_task_execute(task_id=tasks[0].pk)
    candidate_task_execute(task_id=tasks[1].pk)
    assert Item.objects.get(pk=items[0].pk).stage == Stage.NEW
    candidate_task_execute(task_id=tasks[2].pk)
    assert Item.objects.get(pk=items[0].pk).stage == Stage.ANNOTATING


def test_start_validation_messages(project, lead, items, three_providers):
    with pytest.raises(ValidationError, match="No such item in this project: 999999"):
        candidate_job_start(project=project, user=lead, item_ids=[items[0].pk, 999999])
    for p in Provider.objects.all():
        provider_set_enabled(provider=p, enabled=False)
    with pytest.raises(ValidationError, match="No enabled provider"):
        candidate_job_start(project=project, user=lead)
    with pytest.raises(ValidationError, match="Not item ids: x1"):
        parse_item_ids("1, 2 x1")
    assert parse_item_ids("3,1 3\n2") == [3, 1, 2]


def test_no_new_items_is_a_clear_message(project, lead, items, three_providers):
    items_start_annotation(project=project)
    with pytest.raises(ValidationError, match="No item to generate candidates for"):
        candidate_job_start(project=project, user=lead)


def test_other_projects_items_cannot_be_selected(project, lead, items, three_providers, outsider, tmp_path):
    from projects.factories import items_create
    from projects.models import Project

    other_items = items_create(Project.objects.get(slug="other"), tmp_path / "o", 1, start=50)
    with pytest.raises(ValidationError, match="No such item"):
        candidate_job_start(project=project, user=lead, item_ids=[other_items[0].pk])


def test_skip_candidates_moves_new_items(project, items):
    assert items_start_annotation(project=project, item_ids=[items[0].pk]) == 1
    assert items_start_annotation(project=project) == len(items) - 1
    assert items_start_annotation(project=project) == 0
    with pytest.raises(ValidationError):
        items_start_annotation(project=project, item_ids=[123456])


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"api_key_env": "sk-abc123"}, "api_key_env"),
        ({"api_key_env": "AIzaSyD0123456789abcdefghijkl"}, "api_key_env"),
        ({"api_key_env": ""}, "api_key_env"),
        ({"kind": "openai-compatible", "base_url": ""}, "base_url"),
        ({"base_url": "ftp://x"}, "base_url"),
        ({"kind": "nope"}, "kind"),
        ({"requests_per_minute": 0}, "requests_per_minute"),
        ({"timeout_seconds": 10000}, "timeout_seconds"),
        ({"name": ""}, "name"),
        ({"kind": "replay", "replay_file": "/etc/passwd"}, "replay_file"),
        ({"kind": "replay", "replay_file": "../../secret_key.jsonl"}, "replay_file"),
        ({"kind": "replay", "replay_file": "missing.jsonl"}, "replay_file"),
        ({"kind": "replay", "replay_file": ""}, "replay_file"),
    ],
)
def test_provider_validation(project, changes, field):
    data = {"name": "p", "kind": "openai", "model": "gpt", "api_key_env": "OPENAI_API_KEY", **changes}
    with pytest.raises(ValidationError) as exc:
        provider_create(project=project, **data)
    assert field in exc.value.errors


def test_provider_names_are_unique_per_project_and_update_works(project):
    p = provider_create(project=project, name="a", kind="openai", model="m", api_key_env="OPENAI_API_KEY")
    with pytest.raises(ValidationError, match="has this name"):
        provider_create(project=project, name="a", kind="openai", model="m2", api_key_env="OPENAI_API_KEY")
    provider_update(
        provider=p,
        name="b",
        kind="gemini",
        model="g",
        api_key_env="GEMINI_API_KEY",
        requests_per_minute=10,
        timeout_seconds=5,
        enabled=False,
    )
    p.refresh_from_db()
    assert (p.name, p.kind, p.model, p.enabled, p.requests_per_minute) == ("b", "gemini", "g", False, 10)


def test_unreadable_response_bodies_are_retried(
    project, lead, items, three_providers, fake_llm, django_capture_on_commit_callbacks
):
    fake_llm.plan("gpt-test", ["badbody"])
    fake_llm.plan("gemini-test", ["badbody"])
    job = start(project, lead, django_capture_on_commit_callbacks, item_ids=[items[0].pk])
    assert job_progress(job=job).done == 3
    assert len(fake_llm.for_model("gpt-test")) == 2 and len(fake_llm.for_model("gemini-test")) == 2


def test_an_unexpected_crash_never_leaves_a_task_running(
    project, lead, items, three_providers, monkeypatch, django_capture_on_commit_callbacks
):
    from candidates import providers

    def boom(self, request):
        raise KeyError("sdk bug")

    monkeypatch.setattr(providers.OpenAIChatClient, "generate", boom)
    job = start(project, lead, django_capture_on_commit_callbacks, item_ids=[items[0].pk])
    gpt = CandidateTask.objects.get(job=job, provider__name="gpt")
    assert gpt.status == "failed" and "internal error: KeyError" in gpt.error
    job.refresh_from_db()
    assert job.status == "done"


def test_a_reply_without_any_usable_field_counts_as_failed(
    project, lead, items, three_providers, fake_llm, django_capture_on_commit_callbacks
):
    fake_llm.plan("gpt-test", ['body:{"verdict": "harmful", "label": "very bad"}'])
    job = start(project, lead, django_capture_on_commit_callbacks, item_ids=[items[0].pk])
    task = CandidateTask.objects.get(job=job, provider__name="gpt")
    assert task.status == "failed" and "No field of the schema" in task.error and "label" in task.error
    kept = Candidate.objects.get(provider__name="gpt")
    assert kept.fields == {} and {r["field"] for r in kept.removed} >= {"label", "verdict"}
    with django_capture_on_commit_callbacks(execute=True):
        candidate_job_retry_failed(job=job)
    assert Candidate.objects.get(provider__name="gpt").fields["label"] == "harmful"


def test_large_jobs_are_published_by_workers_in_chunks(
    project, lead, items, three_providers, fake_llm, monkeypatch, django_capture_on_commit_callbacks
):
    from candidates import tasks

    monkeypatch.setattr("candidates.tasks.PUBLISH_CHUNK", 5)
    chunks = []
    original = tasks.candidate_tasks_publish_ids
    monkeypatch.setattr(
        tasks,
        "candidate_tasks_publish_ids",
        lambda *, task_ids: (chunks.append(list(task_ids)), original(task_ids=task_ids))[1],
    )
    job = start(project, lead, django_capture_on_commit_callbacks)
    assert [len(c) for c in chunks] == [5, 5, 2]
    assert job_progress(job=job).done == 12 and len(fake_llm.requests) == 12
