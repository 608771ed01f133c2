"""A real Celery worker process against Redis + PostgreSQL, killed in the middle of a batch."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings

from conftest import require

pytestmark = [pytest.mark.services]
ROOT = Path(__file__).resolve().parents[2]


def _redis_ok(url: str) -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
    except Exception:
        return False


def _db_url_for(name: str) -> str:
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + name))


def start_worker(*, db_name: str, log: Path, concurrency: int = 4, name: str = "w") -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": _db_url_for(db_name),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_BROKER_URL": settings.REDIS_URL,
        "CONCORD_MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "CONCORD_VAR_DIR": str(settings.VAR_DIR),
        "CONCORD_TEST_VISIBILITY_TIMEOUT": "2",
        "CONCORD_ALLOW_PRIVATE_PROVIDER_URLS": "1",
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "candidates.tests.worker",
            "-P",
            "prefork",
            "-c",
            str(concurrency),
            "-l",
            "info",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-n",
            f"{name}-{os.getpid()}@%h",
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def kill_hard(proc: subprocess.Popen) -> None:
    """SIGKILL the worker and its pool children, as a crashed machine would leave them."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            kill_hard(proc)


def wait_until(predicate, *, timeout: float, what: str, log: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
    pytest.fail(f"timed out waiting for {what}; worker log tail:\n{tail}")


@pytest.mark.django_db(transaction=True)
def test_killed_worker_leaves_exactly_one_candidate_per_item_and_provider(project, lead, tmp_path, fake_llm, api_keys):
    from django.db import connection

    require(connection.vendor == "postgresql", "needs PostgreSQL: set DATABASE_URL=postgres://...")
    require(bool(settings.REDIS_URL) and _redis_ok(settings.REDIS_URL), "needs Redis: set REDIS_URL=redis://...")
    import redis

    from candidates.models import Candidate, CandidateJob, CandidateTask
    from candidates.services import candidate_job_start, provider_create
    from concord.celery import app
    from projects.factories import items_create

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
    db_name = connection.settings_dict["NAME"]
    app.conf.task_always_eager = False  # publish to Redis for the worker process
    worker = start_worker(db_name=db_name, log=log, name="first")
    try:
        job = candidate_job_start(project=project, user=lead)
        total = len(items) * 3
        wait_until(lambda: Candidate.objects.count() >= 8, timeout=120, what="the first candidates", log=log)
        kill_hard(worker)
        done_at_kill = Candidate.objects.count()
        assert done_at_kill < total, "the batch finished before the kill; the test proves nothing"
        assert CandidateTask.objects.filter(job=job, status__in=["pending", "running"]).exists()

        worker = start_worker(db_name=db_name, log=log, name="second")
        wait_until(
            lambda: not CandidateTask.objects.filter(job=job, status__in=["pending", "running"]).exists(),
            timeout=180,
            what="the batch to finish after the restart",
            log=log,
        )
        pairs = Counter(Candidate.objects.values_list("item_id", "provider_id"))
        assert len(pairs) == total and set(pairs.values()) == {1}
        assert CandidateTask.objects.filter(job=job, status="done").count() == total
        assert CandidateJob.objects.get(pk=job.pk).status == "done"
        # Upstream calls: at most the in-flight ones at the kill were sent twice.
        calls = Counter((r.model, r.user_text) for r in fake_llm.requests)
        assert sum(calls.values()) - len(calls) <= 4 * 2  # concurrency x (first worker's in-flight)
    finally:
        app.conf.task_always_eager = True
        stop(worker)
