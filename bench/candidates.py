"""Benchmark of candidate generation (issue 3): real Celery workers, Redis, PostgreSQL, rate limits.

    .venv/bin/python bench/candidates.py [--items 100] [--rpm 120] [--latency 0.3] [--workers 2] [--concurrency 4]

What it does, all on 127.0.0.1:
1. (re)creates its own PostgreSQL database (default ``concord_bench_cand``) and a temporary var
   folder, migrates, and imports ``--items`` generated images into one meme3w project;
2. starts the fake LLM server (candidates/tests/fake_llm.py) answering every request after
   ``--latency`` seconds, and configures three providers on it (OpenAI SDK, Gemini SDK, an
   OpenAI-compatible server), each limited to ``--rpm`` requests per minute;
3. starts ``--workers`` Celery worker processes (prefork, ``--concurrency`` each) on Redis
   (``--redis``, a database of its own, flushed), waits until they answer a ping, then starts
   one candidate job for all items (one task per item and provider);
4. waits until every task is done and reports, per provider, the achieved requests/minute as
   a share of the limit (measured at the server from first to last request), the most requests
   seen in any 10-second window against what the limit allows, the total time, duplicates
   (stored candidates per (item, provider, prompt version) > 1, and upstream requests sent
   twice for the same item), failures, and the workers' peak resident memory.

Goals: >= 90% of the limit, 0 duplicates.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=100)
    ap.add_argument("--rpm", type=int, default=120, help="rate limit of each provider (requests/minute)")
    ap.add_argument("--latency", type=float, default=0.3, help="fake server latency per request (s)")
    ap.add_argument("--workers", type=int, default=2, help="Celery worker processes")
    ap.add_argument("--concurrency", type=int, default=4, help="pool processes per worker")
    ap.add_argument("--db", default="concord_bench_cand")
    ap.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server URL (no database)")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/3")
    ap.add_argument("--timeout", type=float, default=900)
    return ap.parse_args()


def recreate_database(pg: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def rss_of(pids: list[int]) -> tuple[int, int, int]:
    """(summed RSS, summed PSS, process count) of the worker trees.

    RSS counts the pages the pool processes share with their parent (copy-on-write after the
    fork) once per process; PSS splits shared pages between their users, so its sum is the
    memory the workers really hold.
    """
    import psutil

    rss = pss = count = 0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            for p in [proc, *proc.children(recursive=True)]:
                info = p.memory_full_info()
                rss += info.rss
                pss += getattr(info, "pss", info.rss)
                count += 1
        except psutil.NoSuchProcess:
            continue
    return rss, pss, count


def max_in_window(times: list[float], window: float) -> int:
    best, j = 0, 0
    for i, t in enumerate(times):
        while times[j] < t - window:
            j += 1
        best = max(best, i - j + 1)
    return best


def main() -> int:
    args = parse_args()
    var = Path(os.environ.get("BENCH_VAR") or tempfile.mkdtemp(prefix="concord-bench-cand-"))
    db_url = f"{args.pg}/{args.db}"
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "concord.settings",
            "DATABASE_URL": db_url,
            "REDIS_URL": args.redis,
            "CELERY_BROKER_URL": args.redis,
            "CONCORD_VAR_DIR": str(var),
            "CONCORD_MEDIA_ROOT": str(var / "media"),
            "CONCORD_TEST_VISIBILITY_TIMEOUT": "3600",  # production value: no redelivery during the run
            "BENCH_OPENAI_KEY": "sk-bench",
            "BENCH_GEMINI_KEY": "gm-bench",
            "LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(ROOT),
        }
    )
    recreate_database(args.pg, args.db)
    import django

    django.setup()
    import redis
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    redis.Redis.from_url(args.redis).flushdb()

    from candidates.models import Candidate, CandidateTask
    from candidates.services import candidate_job_start, provider_create
    from candidates.tests.fake_llm import FakeLLM
    from concord.celery import app
    from projects.factories import items_create
    from projects.services import project_create

    t0 = time.monotonic()
    project = project_create(name="Bench", slug="bench", preset="meme3w")
    items_create(project, var / "src", args.items)
    print(f"setup: {args.items} items imported in {time.monotonic() - t0:.1f} s")

    server = FakeLLM(latency=args.latency).start()
    kinds = [
        ("openai", "bench-gpt", "BENCH_OPENAI_KEY", "/v1"),
        ("gemini", "bench-gemini", "BENCH_GEMINI_KEY", ""),
        ("openai-compatible", "bench-qwen-vl", "", "/v1"),
    ]
    providers = [
        provider_create(
            project=project,
            name=model,
            kind=kind,
            model=model,
            api_key_env=key,
            base_url=server.url + suffix,
            requests_per_minute=args.rpm,
            timeout_seconds=30,
        )
        for kind, model, key, suffix in kinds
    ]

    workers, log = [], var / "workers.log"
    for i in range(args.workers):
        workers.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "candidates.tests.worker",
                    "-P",
                    "prefork",
                    "-c",
                    str(args.concurrency),
                    "-l",
                    os.environ.get("BENCH_WORKER_LOG", "warning"),
                    "--without-gossip",
                    "--without-mingle",
                    "-n",
                    f"bench{i}-{os.getpid()}@%h",
                ],
                cwd=ROOT,
                env=os.environ.copy(),
                stdout=log.open("ab"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            replies = app.control.ping(timeout=1.0) or []
            if len(replies) >= args.workers:
                break
            if time.monotonic() > deadline:
                print("workers did not answer a ping within 60 s; log:\n" + log.read_text()[-3000:])
                return 1
        idle_rss, idle_pss, n_procs = rss_of([w.pid for w in workers])
        print(
            f"workers: {args.workers} x {args.concurrency} (prefork), {n_procs} processes, "
            f"idle RSS {idle_rss / 2**20:.0f} MiB (PSS {idle_pss / 2**20:.0f} MiB)"
        )

        start, wall_start = time.monotonic(), time.time()
        job = candidate_job_start(project=project, user=None)
        total = args.items * len(providers)
        peak_rss, peak_pss, last_report, last_sample = idle_rss, idle_pss, 0.0, 0.0
        while CandidateTask.objects.filter(job=job, status__in=["pending", "running"]).exists():
            if time.monotonic() - start > args.timeout:
                print("timed out; log tail:\n" + log.read_text()[-3000:])
                return 1
            if time.monotonic() - last_sample > 5:  # reading smaps costs CPU the workers need
                rss, pss, _ = rss_of([w.pid for w in workers])
                peak_rss, peak_pss, last_sample = max(peak_rss, rss), max(peak_pss, pss), time.monotonic()
            if time.monotonic() - last_report > 10:
                done = CandidateTask.objects.filter(job=job, status="done").count()
                print(f"  {time.monotonic() - start:5.1f} s: {done}/{total} done")
                last_report = time.monotonic()
            time.sleep(0.5)
        elapsed = time.monotonic() - start

        print(
            f"\nitems {args.items} x providers {len(providers)} = {total} tasks; latency {args.latency * 1000:.0f} ms; "
            f"limit {args.rpm}/min per provider; rate limiter: redis"
        )
        print(f"total time: {elapsed:.1f} s (ideal at the limit: {(args.items - 1) * 60 / args.rpm:.1f} s)")
        print(f"{'provider':<15}{'requests':>9}{'req/min':>10}{'share':>8}{'max in 10 s':>13}{'allowed':>9}")
        shares = []
        for p in providers:
            times = sorted(r.at for r in server.for_model(p.model))
            rate = (len(times) - 1) / (times[-1] - times[0]) * 60 if len(times) > 1 else 0.0
            share = rate / args.rpm
            shares.append(share)
            allowed = int(10 * args.rpm / 60) + 1
            print(f"{p.name:<15}{len(times):>9}{rate:>10.1f}{share:>8.1%}{max_in_window(times, 10.0):>13}{allowed:>9}")
            gaps = sorted(b - a for a, b in zip(times, times[1:]))
            print(
                f"{'':15}gaps between requests: min {gaps[0]:.3f} s, median {gaps[len(gaps) // 2]:.3f} s, "
                f"first request {times[0] - wall_start:.2f} s after the start"
            )
        stored_dups = sum(
            n - 1
            for n in Counter(Candidate.objects.values_list("item_id", "provider_id", "prompt_version")).values()
            if n > 1
        )
        upstream = Counter((r.model, r.user_text) for r in server.requests)
        upstream_dups = sum(n - 1 for n in upstream.values() if n > 1)
        failed = CandidateTask.objects.filter(job=job, status="failed").count()
        print(f"candidates stored: {Candidate.objects.count()} / {total}; failed tasks: {failed}")
        print(f"duplicates: stored {stored_dups}, upstream requests sent twice {upstream_dups}")
        print(
            f"worker memory over {n_procs} processes: RSS idle {idle_rss / 2**20:.0f} MiB, peak {peak_rss / 2**20:.0f} MiB "
            f"({peak_rss / n_procs / 2**20:.0f} MiB per process); PSS idle {idle_pss / 2**20:.0f} MiB, "
            f"peak {peak_pss / 2**20:.0f} MiB"
        )
        ok = min(shares) >= 0.9 and stored_dups == 0 and upstream_dups == 0 and failed == 0
        print(f"goal (>= 90% of the limit, 0 duplicates, 0 failures): {'MET' if ok else 'NOT MET'}")
        return 0 if ok else 2
    finally:
        for w in workers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(w.pid, signal.SIGTERM)
        for w in workers:
            try:
                w.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(w.pid, signal.SIGKILL)
        server.stop()
        from django.db import connections

        connections.close_all()


if __name__ == "__main__":
    sys.exit(main())
