"""A real task through a real broker to a real worker process, result read from the database.

With DATABASE_URL=PostgreSQL and REDIS_URL set (CI), this goes through Redis to a Celery
worker subprocess writing to PostgreSQL. Elsewhere it skips and says why.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

from conftest import require

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_task_goes_through_redis_to_a_worker_and_lands_in_postgres(tmp_path):
    require(connection.vendor == "postgresql", "needs DATABASE_URL pointing at PostgreSQL")
    require(bool(os.environ.get("REDIS_URL")), "needs REDIS_URL")
    import redis

    from concord.celery import app
    from projects.models import WorkerHeartbeat
    from projects.tasks import heartbeat_task

    try:
        redis.Redis.from_url(os.environ["REDIS_URL"]).ping()
    except redis.RedisError as exc:
        require(False, f"Redis not reachable: {exc}")
    db = connection.settings_dict
    queue = f"roundtrip-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "CONCORD_VAR_DIR": str(tmp_path),
        "CONCORD_ALLOW_PRIVATE_PROVIDER_URLS": "1",
    }
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "concord",
            "worker",
            "-Q",
            queue,
            "--concurrency",
            "1",
            "--pool",
            "solo",
            "--loglevel",
            "WARNING",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    token = uuid.uuid4().hex
    try:
        app.conf.task_always_eager = False
        heartbeat_task.apply_async(args=[token], queue=queue)
        deadline = time.time() + 60
        while time.time() < deadline and not WorkerHeartbeat.objects.filter(token=token).exists():
            assert worker.poll() is None, worker.stdout.read().decode()
            time.sleep(0.2)
        beat = WorkerHeartbeat.objects.filter(token=token).first()
        assert beat is not None, "the worker did not write the heartbeat within 60 s"
        assert beat.hostname
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
