"""The per-provider limiter: spacing, horizon, 429 penalty, and that it holds across processes."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from candidates.ratelimit import backend_name, rate_limit_penalize, rate_limit_reserve
from candidates.services import provider_create
from conftest import require

REDIS_TEST_URL = "redis://127.0.0.1:6379/3"


def redis_available(url: str) -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
    except Exception:
        return False


@pytest.fixture(params=["database", "redis"])
def backend(request, settings):
    if request.param == "redis":
        import os

        url = os.environ.get("REDIS_URL") or REDIS_TEST_URL
        require(redis_available(url), f"Redis not reachable at {url}")
        settings.REDIS_URL = url
    else:
        settings.REDIS_URL = ""
    assert backend_name() == request.param
    return request.param


def make_provider(project, rpm):
    return provider_create(
        project=project,
        name=f"p{rpm}-{time.monotonic_ns()}",
        kind="openai",
        model="m",
        api_key_env="K",
        requests_per_minute=rpm,
    )


@pytest.mark.django_db
def test_slots_are_spaced_by_the_interval(backend, project):
    p = make_provider(project, 600)  # one request every 0.1 s
    grants = [rate_limit_reserve(provider=p) for _ in range(5)]
    assert all(g.reserved for g in grants)
    assert grants[0].wait < 0.05  # the first slot is now
    # The slots' starts in the limiter's own clock: this process's clock around each call
    # would add the calls' latency (a busy machine), which is not the limiter's spacing.
    gaps = [b.at - a.at for a, b in zip(grants, grants[1:])]
    assert all(0.099 < gap < 0.101 for gap in gaps), gaps
    # And from here: each slot waits for the ones before it.
    assert all(b.wait > a.wait for a, b in zip(grants, grants[1:]))


@pytest.mark.django_db
def test_beyond_the_horizon_nothing_is_reserved(backend, project):
    p = make_provider(project, 6)  # 10 s apart
    assert rate_limit_reserve(provider=p, horizon=15).reserved  # now
    second = rate_limit_reserve(provider=p, horizon=15)
    assert second.reserved and 9 < second.wait <= 10.1
    third = rate_limit_reserve(provider=p, horizon=15)  # would be at +20 s
    assert not third.reserved and 4 < third.wait <= 5.1
    # Not reserving did not consume a slot: asking again gives the same answer.
    assert not rate_limit_reserve(provider=p, horizon=15).reserved


@pytest.mark.django_db
def test_429_penalty_holds_everyone_back(backend, project):
    p = make_provider(project, 6000)
    rate_limit_penalize(provider=p, seconds=5)
    g = rate_limit_reserve(provider=p)
    assert g.reserved and 4.5 < g.wait <= 5.05


@pytest.mark.django_db
def test_providers_are_limited_independently(backend, project):
    a, b = make_provider(project, 1), make_provider(project, 2)
    assert rate_limit_reserve(provider=a).wait < 0.05
    assert rate_limit_reserve(provider=b).wait < 0.05


def _reserve_many(provider_id: int, n: int, queue) -> None:
    import django
    from django.db import connections

    django.setup()
    connections.close_all()
    from candidates.models import Provider

    p = Provider.objects.get(pk=provider_id)
    out = []
    for _ in range(n):
        g = rate_limit_reserve(provider=p, horizon=3600)
        assert g.reserved
        out.append(g.at)
    connections.close_all()
    queue.put(out)


@pytest.mark.django_db(transaction=True)
def test_limit_holds_across_processes(backend, project):
    from django.db import connection, connections

    if backend == "database":
        require(
            connection.vendor == "postgresql", "cross-process database limiter test needs PostgreSQL (DATABASE_URL)"
        )
    p = make_provider(project, 1200)  # 50 ms apart
    connections.close_all()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_reserve_many, args=(p.pk, 10, queue)) for _ in range(4)]
    for proc in procs:
        proc.start()
    starts = sorted(s for _ in procs for s in queue.get(timeout=60))
    for proc in procs:
        proc.join(timeout=30)
    assert len(starts) == 40
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    # Every slot is distinct and exactly one interval after the previous one, whichever
    # process took it: 40 slots over 4 processes span 39 intervals.
    assert min(gaps) > 0.0499, min(gaps)
    assert starts[-1] - starts[0] >= 39 * 0.05 - 1e-3
