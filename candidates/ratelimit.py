"""A per-provider rate limit that holds across worker processes.

GCRA (generic cell rate algorithm) with reservations: the state is one number per provider,
``tat``, the earliest time the next request may start. A caller reserves the slot at
``max(tat, now)`` and advances ``tat`` by ``60 / requests_per_minute``. Requests are thus spaced
evenly, without bursts, so a provider's per-minute quota is never exceeded even at the edges of
its own windows.

A task whose slot lies in the future does not sleep in the worker: it re-schedules itself with
that countdown, holding its reservation. Reservations are made at most ``horizon`` seconds ahead;
beyond it the caller is told when to ask again, so a backlog of thousands of tasks does not
book slots hours away (longer than the broker's visibility timeout).

Backends: Redis (a Lua script, atomic, using the Redis server clock) when ``REDIS_URL`` is set;
otherwise a database row per provider, locked for the read-modify-write.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction

from candidates.models import RateLimitSlot

# Ten minutes: far below the Redis broker's visibility timeout (an hour), beyond which a message
# waiting in a worker would be delivered a second time.
DEFAULT_HORIZON = 600.0

_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval = tonumber(ARGV[1])
local horizon = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = tat - now
if wait > horizon then
  return {0, tostring(wait - horizon), tostring(tat)}
end
local nxt = tat + interval
redis.call('SET', KEYS[1], string.format('%.6f', nxt), 'PX', math.ceil((nxt - now) * 1000) + 1000)
return {1, tostring(wait), string.format('%.6f', tat)}
"""

_RESERVE_MANY = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval = tonumber(ARGV[1])
local horizon = tonumber(ARGV[2])
local count = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local waits = {}
while #waits < count and tat - now <= horizon do
  waits[#waits + 1] = string.format('%.6f', tat - now)
  tat = tat + interval
end
if #waits > 0 then
  redis.call('SET', KEYS[1], string.format('%.6f', tat), 'PX', math.ceil((tat - now) * 1000) + 1000)
end
return {waits, string.format('%.6f', tat - now)}
"""

_PENALIZE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local until_ = now + tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < until_ then
  redis.call('SET', KEYS[1], string.format('%.6f', until_), 'PX', math.ceil((until_ - now) * 1000) + 1000)
end
return 1
"""


@dataclass(frozen=True)
class Batch:
    waits: list[float]  # seconds from now to each reserved slot, in order (at most ``count``)
    backlog: float  # seconds from now to the first slot still free after them


@dataclass(frozen=True)
class Grant:
    reserved: bool  # True: a slot is ours, starting ``wait`` seconds from now
    wait: float  # reserved: seconds until our slot; not reserved: seconds before asking again
    at: float = 0.0  # reserved: the slot's start in the limiter's clock (Redis server / worker)


def rate_key(provider) -> str:
    # The creation time makes the key unique per provider row, so a reused id (tests, a
    # re-created database) never inherits another provider's state.
    return f"concord:ratelimit:{provider.pk}:{provider.created_at.timestamp():.6f}"


_local = threading.local()


def _redis():
    """Per-thread client and registered scripts, rebuilt if REDIS_URL changes (tests)."""
    if getattr(_local, "url", None) != settings.REDIS_URL:
        import redis

        client = redis.Redis.from_url(settings.REDIS_URL)
        _local.url = settings.REDIS_URL
        _local.reserve = client.register_script(_RESERVE)
        _local.penalize = client.register_script(_PENALIZE)
        _local.reserve_many = client.register_script(_RESERVE_MANY)
    return _local


def backend_name() -> str:
    return "redis" if settings.REDIS_URL else "database"


def rate_limit_reserve(*, provider, horizon: float = DEFAULT_HORIZON) -> Grant:
    interval = 60.0 / max(1, provider.requests_per_minute)
    if settings.REDIS_URL:
        granted, seconds, at = _redis().reserve(keys=[rate_key(provider)], args=[f"{interval:.6f}", f"{horizon:.3f}"])
        return Grant(reserved=bool(int(granted)), wait=max(0.0, float(seconds)), at=float(at))
    return _db_reserve(provider=provider, interval=interval, horizon=horizon)


def rate_limit_reserve_many(*, provider, count: int, horizon: float = DEFAULT_HORIZON) -> Batch:
    """Reserve up to ``count`` consecutive slots within the horizon in one atomic step.

    Used when a job is enqueued: each task's message is published for its own slot, so the
    queue never holds a burst of first attempts in front of the slots that are due.
    """
    interval = 60.0 / max(1, provider.requests_per_minute)
    if count <= 0:
        return Batch(waits=[], backlog=0.0)
    if settings.REDIS_URL:
        waits, backlog = _redis().reserve_many(
            keys=[rate_key(provider)], args=[f"{interval:.6f}", f"{horizon:.3f}", str(int(count))]
        )
        return Batch(waits=[float(w) for w in waits], backlog=float(backlog))
    with transaction.atomic():
        slot = _db_slot(provider, RateLimitSlot)
        now = time.time()
        tat = max(slot.tat, now)
        waits = []
        while len(waits) < count and tat - now <= horizon:
            waits.append(tat - now)
            tat += interval
        if waits:
            slot.tat = tat
            slot.save(update_fields=["tat"])
        return Batch(waits=waits, backlog=tat - now)


def rate_limit_penalize(*, provider, seconds: float) -> None:
    """After a 429: no request to this provider from any worker for ``seconds``."""
    if seconds <= 0:
        return
    if settings.REDIS_URL:
        _redis().penalize(keys=[rate_key(provider)], args=[f"{seconds:.3f}"])
        return
    with transaction.atomic():
        slot = _db_slot(provider, RateLimitSlot)
        until = time.time() + seconds
        if slot.tat < until:
            slot.tat = until
            slot.save(update_fields=["tat"])


def _db_slot(provider, model):
    try:
        with transaction.atomic():
            return model.objects.select_for_update().get_or_create(provider=provider)[0]
    except IntegrityError:  # created concurrently by another worker
        return model.objects.select_for_update().get(provider=provider)


def _db_reserve(*, provider, interval: float, horizon: float) -> Grant:
    # One short transaction per reservation: on PostgreSQL the row lock serializes workers,
    # on SQLite the IMMEDIATE transaction takes the database write lock.
    with transaction.atomic():
        slot = _db_slot(provider, RateLimitSlot)
        now = time.time()
        tat = max(slot.tat, now)
        wait = tat - now
        if wait > horizon:
            return Grant(reserved=False, wait=wait - horizon, at=tat)
        slot.tat = tat + interval
        slot.save(update_fields=["tat"])
        return Grant(reserved=True, wait=wait, at=tat)
