"""A real Celery worker process against Redis + PostgreSQL, killed in the middle of a batch.

The broker keeps production's two-hour visibility timeout, so nothing comes back by
redelivery: the job's heartbeat goes stale (a 2 s lease here), the sweeper in the new worker's
beat re-sends the job's task, and its takeover re-publishes what the killed worker left.
"""

from __future__ import annotations

from collections import Counter

import pytest
from django.conf import settings

from core.tests.workers import kill_hard, require_postgres_and_redis, start_worker, stop, wait_until

pytestmark = [pytest.mark.services]

FAULT_ENV = {
    "CONCORD_TEST_VISIBILITY_TIMEOUT": "7200",
    "CONCORD_JOB_LEASE_SECONDS": "2",
    "CONCORD_JOB_SWEEP_SECONDS": "1",
}


@pytest.mark.django_db(transaction=True)
def test_killed_worker_leaves_exactly_one_candidate_per_item_and_provider(project, lead, tmp_path, fake_llm, api_keys):
    require_postgres_and_redis()
    import redis

    from candidates.models import Candidate, CandidateJob, CandidateTask
    from candidates.services import candidate_job_start, provider_create
    from concord.celery import app
    from projects.factories import items_create
    from projects.models import Item

    redis.Redis.from_url(settings.REDIS_URL).flushdb()  # our own Redis database: no stale messages
    items = items_create(project, tmp_path / "src", 12)
    fake_llm.latency = 0.4
    for name, kind, model, key in [
        ("gpt", "openai", "gpt-k", "CONCORD_TEST_OPENAI_KEY"),
        ("gem", "gemini", "gem-k", "CONCORD_TEST_GEMINI_KEY"),
        ("qwen", "openai-compatible", "qwen-k", ""),
    ]:
        provider_create(
            project=project,
            name=name,
            kind=kind,
            model=model,
            api_key_env=key,
            base_url=fake_llm.url + ("" if kind == "gemini" else "/v1"),
            requests_per_minute=6000,
            timeout_seconds=1,
        )
    log = tmp_path / "worker.log"
    app.conf.task_always_eager = False  # publish to Redis for the worker process
    worker = start_worker(log=log, name="first", env=FAULT_ENV)
    try:
        job = candidate_job_start(project=project, user=lead)
        total = len(items) * 3
        wait_until(lambda: Candidate.objects.count() >= 8, timeout=120, what="the first candidates", log=log)
        kill_hard(worker)
        done_at_kill = Candidate.objects.count()
        assert done_at_kill < total, "the batch finished before the kill; the test proves nothing"
        assert CandidateTask.objects.filter(job=job, status__in=["pending", "running"]).exists()
        assert Item.objects.filter(project=project, stage="new").exists()

        worker = start_worker(log=log, name="second", beat_schedule=tmp_path / "beat-schedule", env=FAULT_ENV)
        wait_until(
            lambda: CandidateJob.objects.filter(pk=job.pk, status="done").exists(),
            timeout=90,
            what="the job to be taken over and finish",
            log=log,
        )
        pairs = Counter(Candidate.objects.values_list("item_id", "provider_id"))
        assert len(pairs) == total and set(pairs.values()) == {1}
        assert CandidateTask.objects.filter(job=job, status="done").count() == total
        ended = CandidateJob.objects.get(pk=job.pk)
        assert ended.taken_over_at is not None and ended.attempts >= 2
        assert not Item.objects.filter(project=project, stage="new").exists()  # every item moved on
        # Upstream calls: at most the in-flight ones at the kill were sent twice.
        calls = Counter((r.model, r.user_text) for r in fake_llm.requests)
        assert sum(calls.values()) - len(calls) <= 4 * 2  # concurrency x (first worker's in-flight)
    finally:
        app.conf.task_always_eager = True
        stop(worker)
