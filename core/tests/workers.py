"""Real Celery worker processes for tests: start one against the test database, kill it hard."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings

from conftest import require

ROOT = Path(__file__).resolve().parents[2]


def redis_ok(url: str) -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
    except Exception:
        return False


def require_postgres_and_redis() -> None:
    from django.db import connection

    require(connection.vendor == "postgresql", "needs PostgreSQL: set DATABASE_URL=postgres://...")
    require(bool(settings.REDIS_URL) and redis_ok(settings.REDIS_URL), "needs Redis: set REDIS_URL=redis://...")


def _db_url_for(name: str) -> str:
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + name))


def start_worker(
    *,
    log: Path,
    concurrency: int = 4,
    name: str = "w",
    beat_schedule: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """A worker (``candidates.tests.worker``) on the test database, in its own process group.

    ``beat_schedule``: also run Celery beat inside it (the sweeper), as ``make run`` does.
    """
    from django.db import connection

    full_env = {
        **os.environ,
        "DATABASE_URL": _db_url_for(connection.settings_dict["NAME"]),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_BROKER_URL": settings.REDIS_URL,
        "CONCORD_MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "CONCORD_VAR_DIR": str(settings.VAR_DIR),
        "CONCORD_TEST_VISIBILITY_TIMEOUT": "2",
        "CONCORD_ALLOW_PRIVATE_PROVIDER_URLS": "1",
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    args = [sys.executable, "-m", "candidates.tests.worker", "-P", "prefork", "-c", str(concurrency), "-l", "info"]
    args += ["--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{name}-{os.getpid()}@%h"]
    if beat_schedule is not None:
        args += ["-B", "-s", str(beat_schedule)]
    return subprocess.Popen(
        args, cwd=ROOT, env=full_env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
    )


def kill_hard(proc: subprocess.Popen) -> None:
    """SIGKILL the worker and its pool (and embedded beat): nothing runs its cleanup."""
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


def wait_until(predicate, *, timeout: float, what: str, log: Path, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every)
    tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
    pytest.fail(f"timed out waiting for {what}; worker log tail:\n{tail}")
