"""Task options reached Celery; the broker path re-schedules instead of sleeping or retrying blindly."""

from __future__ import annotations

import random
import time

import pytest
from celery.exceptions import Retry

from candidates.models import CandidateTask, RateLimitSlot
from candidates.services import candidate_job_start, provider_create
from candidates.tasks import BACKOFF_CAP, MAX_RETRIES, backoff_delay, candidate_task_run
from concord.celery import app


def test_task_options_reached_the_task_object():
    task = app.tasks["candidates.generate_candidate"]
    assert task is candidate_task_run or task.name == candidate_task_run.name
    assert task.acks_late is True
    assert task.reject_on_worker_lost is True
    assert task.max_retries == MAX_RETRIES == 6
    assert task.soft_time_limit == 360 and task.time_limit == 420
    assert task.ignore_result is True


def test_job_task_options_reached_the_task_object():
    task = app.tasks["candidates.run_job"]
    assert task.acks_late is True and task.reject_on_worker_lost is True
    assert task.max_retries == 0 and task.soft_time_limit == 570 and task.time_limit == 600


def test_celery_settings_reached_the_app():
    # The CELERY_ namespace is read (a typo such as CELERT_ would leave Celery's defaults).
    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1
    assert app.conf.broker_transport_options


def test_backoff_grows_exponentially_with_jitter_and_honours_retry_after():
    rng = random.Random(1)
    for retries in range(8):
        exp = min(BACKOFF_CAP, 5 * 2**retries)
        for _ in range(50):
            d = backoff_delay(retries=retries, rng=rng)
            assert exp * 0.5 <= d <= exp
    assert len({round(backoff_delay(retries=3, rng=rng), 3) for _ in range(20)}) > 10  # jitter
    assert backoff_delay(retries=0, retry_after=42, rng=rng) >= 42
    assert backoff_delay(retries=0, retry_after=10**6, rng=rng) <= 1801  # capped below visibility timeout


@pytest.fixture
def captured(monkeypatch):
    """Capture what the task would publish to the broker (retry or re-schedule)."""
    calls = []

    def fake_apply_async(args=None, kwargs=None, **options):
        calls.append({"args": args, "kwargs": kwargs, **options})

    monkeypatch.setattr(candidate_task_run, "apply_async", fake_apply_async)
    return calls


def run_as_worker(task_id: int, *, retries: int = 0, slot_at: float | None = None):
    """Run the task body as a worker would (not eager), with a given retry count."""
    candidate_task_run.push_request(
        id="t-1",
        retries=retries,
        is_eager=False,
        called_directly=False,
        args=(task_id,),
        kwargs={"slot_at": slot_at},
        delivery_info={},
    )
    try:
        return candidate_task_run.run(task_id, slot_at=slot_at)
    finally:
        candidate_task_run.pop_request()


@pytest.mark.django_db
def test_429_retries_through_the_broker_with_retry_after(project, lead, items, three_providers, fake_llm, captured):
    fake_llm.plan("gpt-test", ["429:7"])
    job = candidate_job_start(project=project, user=lead, item_ids=[items[0].pk], enqueue=False)
    task = CandidateTask.objects.get(job=job, provider__name="gpt")
    with pytest.raises(Retry):
        run_as_worker(task.pk)
    (call,) = captured
    assert 7 <= call["countdown"] <= 8.01 and call["retries"] == 1
    task.refresh_from_db()
    assert task.status == "pending" and "HTTP 429" in task.error and task.lease_until is None


@pytest.mark.django_db
def test_last_retry_fails_the_task_without_publishing(project, lead, items, three_providers, fake_llm, captured):
    fake_llm.plan("gpt-test", ["503"])
    job = candidate_job_start(project=project, user=lead, item_ids=[items[0].pk], enqueue=False)
    task = CandidateTask.objects.get(job=job, provider__name="gpt")
    assert run_as_worker(task.pk, retries=MAX_RETRIES) == "failed"
    assert captured == []
    task.refresh_from_db()
    assert task.status == "failed" and "gave up after 7 attempts" in task.error


def slow_provider(project, fake_llm, rpm):
    return provider_create(
        project=project,
        name=f"rpm{rpm}",
        kind="openai",
        model="gpt-test",
        base_url=f"{fake_llm.url}/v1",
        api_key_env="CONCORD_TEST_OPENAI_KEY",
        requests_per_minute=rpm,
    )


@pytest.mark.django_db
def test_rate_limited_task_reschedules_itself_into_its_slot(
    project, lead, items, fake_llm, api_keys, captured, settings
):
    import time

    settings.REDIS_URL = ""  # database limiter
    p = slow_provider(project, fake_llm, 2)  # one request per 30 s
    job = candidate_job_start(project=project, user=lead, item_ids=[i.pk for i in items[:3]], enqueue=False)
    t1, t2, t3 = CandidateTask.objects.filter(job=job, provider=p).order_by("id")
    assert run_as_worker(t1.pk) == "done"
    start = time.monotonic()
    assert run_as_worker(t2.pk, retries=2) == "rescheduled"
    assert run_as_worker(t3.pk) == "rescheduled"
    assert time.monotonic() - start < 1  # the worker did not wait
    first, second = captured
    assert 29 <= first["countdown"] <= 30 and 59 <= second["countdown"] <= 60  # arrives a little early
    assert second["kwargs"]["slot_at"] - first["kwargs"]["slot_at"] == pytest.approx(30, abs=0.01)
    assert first["retries"] == 2 and second["retries"] == 0  # waiting did not spend a retry
    assert len(fake_llm.requests) == 1
    # When the re-scheduled message arrives, it sends in its slot without a new reservation.
    tat = RateLimitSlot.objects.get(provider=p).tat
    assert run_as_worker(t2.pk, slot_at=time.time()) == "done"
    assert RateLimitSlot.objects.get(provider=p).tat == tat and len(fake_llm.requests) == 2


@pytest.mark.django_db
def test_beyond_the_horizon_a_task_asks_again_later(
    project, lead, items, fake_llm, api_keys, captured, settings, monkeypatch
):
    settings.REDIS_URL = ""
    monkeypatch.setattr("candidates.services.execution.DEFAULT_HORIZON", 50.0)
    p = slow_provider(project, fake_llm, 2)
    job = candidate_job_start(project=project, user=lead, item_ids=[i.pk for i in items[:3]], enqueue=False)
    t1, t2, t3 = CandidateTask.objects.filter(job=job, provider=p).order_by("id")
    t0 = time.time()
    run_as_worker(t1.pk)
    run_as_worker(t2.pk)  # slot at +30 s
    run_as_worker(t3.pk)  # would be +60 s > 50 s: no reservation
    elapsed = time.time() - t0  # the third asked this much after the first slot, at most
    assert captured[1]["kwargs"] == {"slot_at": None}
    # Asks again when its slot would be within the horizon: 60 - 50 s after the first slot,
    # less the time the three calls took (a busy machine), plus a jitter of up to horizon / 4.
    assert 10 - elapsed - 0.01 <= captured[1]["countdown"] <= 10 + 50 / 4 + 0.01


@pytest.mark.django_db
def test_a_late_slot_is_given_up_not_bunched(project, lead, items, fake_llm, api_keys, captured, settings):
    import time

    settings.REDIS_URL = ""
    p = slow_provider(project, fake_llm, 600)  # 0.1 s apart
    job = candidate_job_start(project=project, user=lead, item_ids=[items[0].pk], enqueue=False)
    (task,) = CandidateTask.objects.filter(job=job, provider=p)
    assert run_as_worker(task.pk, slot_at=time.time() - 5) == "done"  # 5 s late: took a fresh slot
    assert RateLimitSlot.objects.get(provider=p).tat > time.time() - 1


@pytest.mark.django_db
def test_publishing_times_each_message_for_its_own_slot(
    project, lead, items, fake_llm, api_keys, captured, settings, monkeypatch, tmp_path
):
    """A job is not published as one burst: each message is due at its slot, the rest later."""
    import time

    from candidates.services import SLOT_LEAD
    from candidates.tasks import candidate_tasks_publish
    from projects.factories import items_create

    settings.REDIS_URL = ""
    monkeypatch.setattr("candidates.tasks.DEFAULT_HORIZON", 5.0)
    more = items_create(project, tmp_path / "more", 6, start=10)
    p = slow_provider(project, fake_llm, 60)  # one per second
    job = candidate_job_start(project=project, user=lead, item_ids=[i.pk for i in items + more], enqueue=False)
    tasks = list(CandidateTask.objects.filter(job=job, provider=p).order_by("id"))
    before = time.time()
    candidate_tasks_publish(tasks=tasks, providers=[p])
    # The call's own duration (a busy machine) shifts every figure below by up to this much.
    tol = 0.05 + (time.time() - before)
    assert len(captured) == 10
    reserved = [c for c in captured if c["kwargs"] and c["kwargs"].get("slot_at")]
    later = [c for c in captured if not c["kwargs"]]
    assert len(reserved) == 6 and len(later) == 4  # slots at 0..5 s are within the 5 s horizon
    slots = [c["kwargs"]["slot_at"] - before for c in reserved]
    assert [s - slots[0] for s in slots] == pytest.approx([0, 1, 2, 3, 4, 5], abs=1e-6)  # one second apart
    assert 0 <= slots[0] <= tol
    assert [c["countdown"] for c in reserved] == pytest.approx(
        [0, 1 - SLOT_LEAD, 2 - SLOT_LEAD, 3 - SLOT_LEAD, 4 - SLOT_LEAD, 5 - SLOT_LEAD], abs=tol
    )
    # The others come back when their turn (6, 7, 8, 9 s) is about half a horizon away.
    for k, c in enumerate(later):
        turn = 6 + k
        assert turn - 2.5 - tol <= c["countdown"] <= turn - 2.5 + 5 / 8 + tol
