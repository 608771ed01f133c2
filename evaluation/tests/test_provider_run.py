"""A lead runs a configured provider on a release split as a job (core.jobs): the real SDKs
talk to a local HTTP server (candidates.tests.fake_llm), replies go through the candidates'
parser, and the run enters the leaderboard."""

from __future__ import annotations

import pytest

from candidates.services import provider_create
from candidates.tests.fake_llm import FakeLLM
from core.errors import Busy
from core.models import JobStatus
from evaluation.models import ProviderRun, Source, Submission
from evaluation.services import provider_run_start
from evaluation.tasks import RUN_OPTIONS, provider_run_task
from evaluation.tests.conftest import records

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake_llm():
    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture
def provider(project, fake_llm, monkeypatch):
    monkeypatch.setenv("CONCORD_TEST_OPENAI_KEY", "sk-test-openai-0123456789")
    return provider_create(
        project=project,
        name="gpt",
        kind="openai",
        model="gpt-test",
        base_url=f"{fake_llm.url}/v1",
        api_key_env="CONCORD_TEST_OPENAI_KEY",
        requests_per_minute=6000,
        timeout_seconds=2,
    )


def test_provider_run_scores_the_split_with_the_release_prompt(release, provider, fake_llm, lead) -> None:
    rows = records(release, "train")
    fake_llm.plan("gpt-test", ["ok", "prose", "bad_boxes"])
    run = provider_run_start(user=lead, release=release, split="train", provider_id=provider.pk, enqueue=False)
    provider_run_task.apply(args=[run.pk])
    run.refresh_from_db()
    assert run.status == JobStatus.DONE, run.error
    assert len(fake_llm.for_model("gpt-test")) == len(rows)
    sub = Submission.objects.get(pk=run.submission_id)
    assert sub.source == Source.PROVIDER and sub.provider_id == provider.pk
    counts = sub.report["counts"]
    assert counts["matched"] == len(rows) and counts["missing"] == 0
    # the reply with no JSON object makes every field of its item malformed
    assert all(v >= 1 for v in sub.report["malformed_fields"].values())
    assert 0 < sub.scores["figures"]["label.acc"]["value"] < 1
    # a redelivered task does nothing: the job is done
    provider_run_task.apply(args=[run.pk])
    assert Submission.objects.filter(source=Source.PROVIDER).count() == 1


def test_a_permanent_provider_error_fails_the_run_and_writes_nothing(release, provider, fake_llm, lead) -> None:
    fake_llm.plan("gpt-test", ["401"])
    run = provider_run_start(user=lead, release=release, split="train", provider_id=provider.pk, enqueue=False)
    provider_run_task.apply(args=[run.pk])
    run.refresh_from_db()
    assert run.status == JobStatus.FAILED and "refused" in run.error
    assert not Submission.objects.exists()


def test_one_run_per_provider_and_release_at_a_time(release, provider, lead) -> None:
    provider_run_start(user=lead, release=release, split="train", provider_id=provider.pk, enqueue=False)
    with pytest.raises(Busy):
        provider_run_start(user=lead, release=release, split="train", provider_id=provider.pk, enqueue=False)
    assert ProviderRun.objects.count() == 1


def test_task_options_reached_celery() -> None:
    for key, value in RUN_OPTIONS.items():
        assert getattr(provider_run_task, key) == value, key
    assert provider_run_task.name == "evaluation.run_provider" == ProviderRun.task_name


def test_run_progress_partial_for_leads_only(release, provider, lead, researcher, client_for) -> None:
    run = provider_run_start(user=lead, release=release, split="train", provider_id=provider.pk, enqueue=False)
    page = client_for(lead).get("/p/p1/releases/v1/leaderboard/?split=train").content.decode()
    assert f'id="job-evaluation-{run.pk}"' in page
    assert client_for(lead).get(f"/p/p1/jobs/evaluation/{run.pk}/").status_code == 200
    assert client_for(researcher).get(f"/p/p1/jobs/evaluation/{run.pk}/").status_code == 403
