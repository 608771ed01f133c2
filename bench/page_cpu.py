"""CPU per request of the annotation workspace, by request kind, in-process (no HTTP, no threads).

    .venv/bin/python bench/page_cpu.py [--db concord_bench_ann] [--rounds 150] [--profile KIND]

Runs against a database seeded by ``bench/annotate_load.py`` (run that first with the same
``--db``; it leaves its database behind). Each round is what one simulated annotator of the load
bench does, through the whole WSGI stack (middleware, session cookie, CSRF check on): "next"
(the claim), the item page, its image, the progress panel, two draft saves and the submit. Each
request's process CPU time is summed per kind; the rounds use fresh annotators in turn, as the
load does. ``--profile page`` prints the top of a cProfile of that kind's requests.

The figures are lower than the load bench's gunicorn CPU per request (no HTTP parsing, no
thread switches, no GIL contention) but move with it, and show which kind costs what.

Measured (issue 18 "cheaper pages", 2 cores shared with other work: CPU ms per request, with the
load average; single runs vary by 10-20 %):

    kind        before   after (field widgets kept, hot queries written out: core.rows)
    next          8.0      5.5 - 7.1
    page          9.9      5.4 - 5.5
    image         3.9      2.8 - 3.5
    progress      6.1      2.2 - 2.4
    draft         7.2      3.4 - 4.8
    submit       10.7      6.2 - 8.6
    mix           7.6      4.8 - 5.0        (load 1.4-2.7)

``annotate_load.py --annotators 200 --busy 1`` at the same time: gunicorn CPU 8.6 -> 7.0 ms per
request, p50 / p95 / p99 25.3 / 66.4 / 102.7 -> 12.9 / 35.9 / 50.5 ms, 40 requests/s,
PostgreSQL 2.4 ms per request both times (load average before the run 1.35 and 1.59).
Re-run on a quiet machine after the last of these changes (2026-12-02 06:00, load average 1.7
before, 2.1 after; two runs): gunicorn 6.6 ms per request both times, p50 / p95 / p99 12.3 /
32.1 / 50.0 and 12.4 / 33.2 / 50.5 ms, 40.2 requests/s, PostgreSQL 2.2-2.3 ms per request.
What is left of a page: Django's middleware, session and user lookup (an ORM query on every
request), template rendering of the rest of the workspace (~1 ms; the candidate table ~0.5 ms).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import secrets
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

KINDS = ("next", "page", "image", "progress", "draft", "submit")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", default="concord_bench_ann")
    p.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    p.add_argument("--rounds", type=int, default=150)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--profile", choices=KINDS, default=None)
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--queries", action="store_true", help="print the SQL of each request of the last round")
    return p.parse_args()


def _area(filename: str) -> str:
    if "site-packages/" in filename:
        rest = filename.split("site-packages/", 1)[1].split("/")
        return "/".join(rest[:3] if rest[0] == "django" else rest[:1])
    if filename.startswith(str(Path(__file__).resolve().parent.parent)):
        return "concord: " + "/".join(Path(filename).relative_to(Path(__file__).resolve().parent.parent).parts[:2])
    return "python: " + Path(filename).name


def main() -> int:
    args = parse_args()
    from bench.annotate_load import _attr, bench_env, django_setup, record

    django_setup(bench_env(args))
    import random

    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from projects.models import Membership, Project

    project = Project.objects.get(slug="bench")
    slug = project.slug
    users = [m.user for m in Membership.objects.filter(project=project, role="annotator").select_related("user")]
    rnd = random.Random(1)
    cpu = defaultdict(float)
    count = defaultdict(int)
    # CPU time, not wall time: waiting for PostgreSQL (on the same cores) is not our cost.
    profiler = cProfile.Profile(time.process_time) if args.profile else None

    def timed(kind, measured, method, url, body=None, content_type="application/json"):
        """One request through the WSGI stack, its process CPU time added to ``kind``."""

        def send():
            if method == "get":
                r = client.get(url)
                if r.streaming:
                    b"".join(r.streaming_content)
                return r
            return client.post(url, body, content_type=content_type)

        profiling = profiler is not None and measured and kind == args.profile
        if profiling:
            profiler.enable()
        t0 = time.process_time()
        if args.queries and n == total - 1:
            with CaptureQueriesContext(connection) as ctx:
                r = send()
            print(f"--- {kind}: {len(ctx.captured_queries)} queries")
            for q in ctx.captured_queries:
                print("   ", q["sql"][:300])
        else:
            r = send()
        spent = time.process_time() - t0
        if profiling:
            profiler.disable()
        if measured:
            cpu[kind] += spent
            count[kind] += 1
        return r

    total = args.warmup + args.rounds
    # One client (one WSGI handler, its middleware loaded once, as in a gunicorn worker); each
    # round swaps in a fresh annotator's session and CSRF cookies.
    client = Client(enforce_csrf_checks=True, HTTP_HOST="127.0.0.1")
    for n in range(total):
        measured = n >= args.warmup
        user = users[n % len(users)]
        s = SessionStore()
        s[SESSION_KEY] = str(user.pk)
        s[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        s[HASH_SESSION_KEY] = user.get_session_auth_hash()
        s.create()
        csrf = secrets.token_hex(16)
        client.defaults["HTTP_X_CSRFTOKEN"] = csrf
        client.cookies.clear()
        client.cookies["sessionid"] = s.session_key
        client.cookies["csrftoken"] = csrf

        r = timed("next", measured, "post", f"/p/{slug}/annotate/next", "", "application/x-www-form-urlencoded")
        assert r.status_code == 302 and "/annotate/" in r["Location"], (r.status_code, r.get("Location"))
        item_path = r["Location"]
        item_id = item_path.rstrip("/").split("/")[-1]
        r = timed("page", measured, "get", item_path)
        assert r.status_code == 200, r.status_code
        body = r.content
        timed("image", measured, "get", f"/p/{slug}/items/{item_id}/image")
        r = timed("progress", measured, "get", f"/p/{slug}/annotate/progress")
        assert r.status_code == 200
        version = int(json.loads(_attr(body, b"data-state"))["version"])
        values = record(rnd, 0)
        api = f"/api/projects/{slug}/annotate/{item_id}"
        for step in range(2):
            partial = {k: v for i, (k, v) in enumerate(values.items()) if i <= step + 1}
            payload = json.dumps({"values": partial, "version": version, "time_spent_ms": 1000})
            r = timed("draft", measured, "post", f"{api}/draft", payload)
            assert r.status_code == 200, (r.status_code, r.content[:300])
            version = r.json()["version"]
        payload = json.dumps(
            {"values": values, "version": version, "provenance": {"label": {"letter": "A"}}, "time_spent_ms": 900}
        )
        r = timed("submit", measured, "post", f"{api}/submit", payload)
        assert r.status_code == 200, (r.status_code, r.content[:300])

    all_cpu = sum(cpu.values())
    all_n = sum(count.values())
    print(f"{'kind':10} {'n':>5} {'CPU ms/request':>15}")
    for kind in KINDS:
        print(f"{kind:10} {count[kind]:5d} {1000 * cpu[kind] / max(count[kind], 1):15.2f}")
    # The load bench's mix: per round one next, page, image, progress, submit and 1-3 drafts (2).
    print(f"{'mix':10} {all_n:5d} {1000 * all_cpu / max(all_n, 1):15.2f}")
    if profiler:
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)
        print(out.getvalue())
        print("own time by area (share of the profiled kind's total):")
        areas = defaultdict(float)
        for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():
            areas[_area(filename)] += tottime
        whole = sum(areas.values())
        for area, spent in sorted(areas.items(), key=lambda kv: -kv[1]):
            print(f"  {area:40} {100 * spent / whole:5.1f} %")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "concord.settings")
    sys.exit(main())
