"""Load test of the annotation workspace: simulated annotators against gunicorn + PostgreSQL.

    .venv/bin/python bench/annotate_load.py [--annotators 200] [--items 3000] [--duration 60]

What it does, all on 127.0.0.1:
1. (re)creates its own PostgreSQL database (default ``concord_bench_ann``) and var folder,
   migrates it, collects static files, and seeds one meme3w project (N = 2) with ``--items``
   items in the annotating stage, three anonymous candidates per item, and ``--annotators``
   annotators who have read the content warning and hold a session (made directly in the
   session store, so no password hashing is timed);
2. starts gunicorn bound to 127.0.0.1 only (default 3 gthread workers x 2 threads: on a 2-CPU
   machine more threads only add GIL contention; 4 x 4 measured p95 193 ms where 3 x 2 gave
   64 ms at the same request rate);
3. runs one thread per simulated annotator for ``--duration`` seconds (and at most
   ``--max-requests`` requests each): press "next" (POST, the claim), open the item page and
   its image, poll the htmx progress panel, autosave 1-3 drafts, submit, and so on, with an
   exponential think time (mean ``--think`` seconds: 8.5 s gives about 40 requests/s from 200 annotators, since opening an item is four requests in a row);
4. prints p50 / p95 / p99 latency per request kind, the throughput and the errors, then
   counts the SQL queries of each page and action in-process (Django test client and
   ``CaptureQueriesContext``) on this project and on a second, 20-item project, to show the
   counts do not depend on the project's size.

Goals (issue 4): p95 <= 50 ms at 200 annotators (~40 requests/s); <= 8 queries per page.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import postgres_cpu_seconds

ROOT = Path(__file__).resolve().parent.parent
PY = Path(sys.executable)
GUNICORN = PY.parent / "gunicorn"

HARMFUL_TEXT = "people from Planet Zorg"
CATEGORIES = ["group background", "religion and caste", "gender", "health condition"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--annotators", type=int, default=200)
    p.add_argument("--items", type=int, default=3000)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of measured load (bounded)")
    p.add_argument(
        "--ramp",
        type=float,
        default=20.0,
        help="annotators arrive spread over this many seconds; requests then are not measured",
    )
    p.add_argument("--think", type=float, default=8.5, help="mean think time between requests, seconds")
    p.add_argument("--max-requests", type=int, default=500, help="per annotator (bounds the loop)")
    p.add_argument("--db", default="concord_bench_ann")
    p.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    p.add_argument("--port", type=int, default=8781)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--worker-class", default="gthread", choices=["gthread", "sync"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--busy",
        type=int,
        default=0,
        help="processes busy-looping on a core during the run (issue 18: p95 must hold with one)",
    )
    return p.parse_args()


# --------------------------------------------------------------------------- setup


def bench_env(args) -> dict:
    var = Path(f"/tmp/{args.db}")
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    env.update(
        {
            "DATABASE_URL": f"{args.pg}/{args.db}",
            "CONCORD_VAR_DIR": str(var),
            "DEBUG": "0",
            "ALLOWED_HOSTS": "127.0.0.1,testserver",
            "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "concord.settings",
            "DB_CONN_MAX_AGE": "600",
        }
    )
    return env


def create_database(args, env):
    import psycopg

    var = Path(env["CONCORD_VAR_DIR"])
    shutil.rmtree(var, ignore_errors=True)
    var.mkdir(parents=True)
    with psycopg.connect(f"{args.pg}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{args.db}"')
    for cmd in (["migrate", "--no-input", "-v", "0"], ["collectstatic", "--no-input", "-v", "0"]):
        subprocess.run([str(PY), "manage.py", *cmd], cwd=ROOT, env=env, check=True)


def django_setup(env):
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def seed(args) -> tuple[str, list[dict]]:
    """Project, items, candidates and annotators with sessions. Returns (slug, [{user, cookie}])."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.sessions.backends.db import SessionStore
    from django.utils import timezone

    from annotation.services import content_warning_accept
    from candidates.models import Candidate, Provider
    from projects.factories import items_create, project_with_members
    from projects.models import Item, Stage

    rnd = random.Random(args.seed)
    User = get_user_model()
    lead = User.objects.create_user("bench_lead", password=None)
    users = [User(username=f"bench_ann{i:03d}", last_login=timezone.now()) for i in range(args.annotators)]
    for u in users:
        u.set_unusable_password()
    User.objects.bulk_create(users)
    users = list(User.objects.filter(username__startswith="bench_ann").order_by("id"))
    project = project_with_members("bench", lead=[lead], annotator=users)
    project.claim_timeout_minutes = 30
    project.save()
    small = project_with_members("bench-small", lead=[lead], annotator=users[:1])

    tmp = Path(settings.VAR_DIR) / "seed"
    real = items_create(project, tmp / "a", 20, texts=[f"Meme {i}: the {HARMFUL_TEXT} strike again" for i in range(20)])
    items_create(small, tmp / "b", 20, texts=[f"Small {i}: the {HARMFUL_TEXT}" for i in range(20)])
    template = real[0]
    extra = [
        Item(
            project=project,
            import_key=f"bench{i}",
            image=real[i % 20].image,
            image_sha256=template.image_sha256,
            image_format=template.image_format,
            width=template.width,
            height=template.height,
            pixel_hash=f"bench{i}",
            phash=template.phash,
            text=f"Bench meme {i}: the {HARMFUL_TEXT} again",
            source_id=f"bench{i}",
            source_dataset="bench",
        )
        for i in range(max(0, args.items - 20))
    ]
    Item.objects.bulk_create(extra, batch_size=1000)
    Item.objects.filter(project__in=[project, small]).update(stage=Stage.ANNOTATING)
    for p in (project, small):
        providers = [
            Provider.objects.create(
                project=p,
                name=f"model{k}",
                kind="openai-compatible",
                model=f"hidden-model-{k}",
                base_url="http://127.0.0.1:9/v1",
            )
            for k in range(3)
        ]
        cands = []
        for item in Item.objects.filter(project=p).only("id"):
            for k, prov in enumerate(providers):
                cands.append(
                    Candidate(
                        item=item,
                        provider=prov,
                        prompt_version="v1",
                        model_name=prov.model,
                        raw_reply="{}",
                        fields=record(rnd, k),
                    )
                )
        Candidate.objects.bulk_create(cands, batch_size=2000)
    sessions = []
    for u in users:
        content_warning_accept(user=u, project=project)
        s = SessionStore()
        s[SESSION_KEY] = str(u.pk)
        s[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        s[HASH_SESSION_KEY] = u.get_session_auth_hash()
        s.create()
        sessions.append({"username": u.username, "session": s.session_key})
    content_warning_accept(user=users[0], project=small)
    from django.db import connection

    with connection.cursor() as cur:
        # Fresh planner statistics after the bulk load, as autovacuum would gather them.
        cur.execute("ANALYZE")
    return project.slug, sessions


def record(rnd: random.Random, k: int) -> dict:
    if rnd.random() < 0.4:
        return {
            "label": "non-harmful",
            "target_category": None,
            "target_entity": None,
            "text_mention": None,
            "visual_region": [],
        }
    x, y = rnd.randrange(0, 500), rnd.randrange(0, 500)
    return {
        "label": "harmful",
        "target_category": rnd.choice(CATEGORIES),
        "target_entity": rnd.choice(["people from Planet Zorg", "Zorgians", "Zorg people"]),
        "text_mention": HARMFUL_TEXT if rnd.random() < 0.7 else None,
        "visual_region": [[x, y, x + rnd.randrange(50, 400), y + rnd.randrange(50, 400)]] if rnd.random() < 0.6 else [],
    }


# --------------------------------------------------------------------------- load


class Annotator:
    """One simulated person: keep-alive connection, session + CSRF cookies, a think time."""

    def __init__(self, port, session_key, slug, rnd, stats, deadline, max_requests, think, ramp, measure_from):
        self.port, self.slug, self.rnd, self.stats = port, slug, rnd, stats
        self.ramp, self.measure_from = ramp, measure_from
        self.deadline, self.max_requests, self.think = deadline, max_requests, think
        self.csrf = secrets.token_hex(16)  # 32 characters: Django accepts the secret itself as token
        self.cookie = f"sessionid={session_key}; csrftoken={self.csrf}"
        self.conn = None
        self.requests = 0

    def request(self, kind, method, path, body=None, content_type=None, expect=(200,)):
        headers = {"Cookie": self.cookie, "Host": "127.0.0.1", "X-CSRFToken": self.csrf}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            t0 = time.perf_counter()
            try:
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                data = resp.read()
            except (ConnectionError, http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    self.stats.error(kind, "connection")
                    return None, None, b""
                continue
            elapsed = time.perf_counter() - t0
            if resp.getheader("Connection", "").lower() == "close":
                self.conn.close()
                self.conn = None
            self.requests += 1
            if t0 >= self.measure_from:
                self.stats.record(kind, elapsed)
                if resp.status not in expect:
                    self.stats.error(kind, resp.status)
            elif resp.status not in expect:
                self.stats.error(kind, f"{resp.status} (ramp)")
            return resp.status, resp.getheader("Location"), data
        return None, None, b""

    def pause(self):
        time.sleep(max(0.0, min(self.rnd.expovariate(1 / self.think), 4 * self.think, self.deadline - time.time())))

    def alive(self):
        return time.time() < self.deadline and self.requests < self.max_requests

    def run(self):
        slug = self.slug
        time.sleep(self.rnd.uniform(0, self.ramp))  # people arrive over the ramp, not all at once
        while self.alive():
            status, location, _ = self.request(
                "next",
                "POST",
                f"/p/{slug}/annotate/next",
                body="",
                content_type="application/x-www-form-urlencoded",
                expect=(302,),
            )
            if status != 302 or not location or "/annotate/" not in location or location.endswith("/annotate/"):
                self.stats.note("queue empty or break")
                return
            item_path = urlsplit(location).path
            item_id = item_path.rstrip("/").split("/")[-1]
            status, _, body = self.request("page", "GET", item_path)
            if status != 200:
                continue
            self.request("image", "GET", f"/p/{slug}/items/{item_id}/image")
            self.request("progress", "GET", f"/p/{slug}/annotate/progress")
            version = int(json.loads(_attr(body, b"data-state"))["version"])
            values = record(self.rnd, 0)
            api = f"/api/projects/{slug}/annotate/{item_id}"
            for step in range(self.rnd.randint(1, 3)):
                self.pause()
                if not self.alive():
                    return
                partial = {k: v for i, (k, v) in enumerate(values.items()) if i <= step + 1}
                status, _, data = self.request(
                    "draft",
                    "POST",
                    f"{api}/draft",
                    body=json.dumps(
                        {"values": partial, "version": version, "time_spent_ms": self.rnd.randint(500, 4000)}
                    ),
                )
                if status == 200:
                    version = json.loads(data)["version"]
            self.pause()
            if not self.alive():
                return
            self.request(
                "submit",
                "POST",
                f"{api}/submit",
                body=json.dumps(
                    {
                        "values": values,
                        "version": version,
                        "provenance": {"label": {"letter": "A"}},
                        "time_spent_ms": self.rnd.randint(500, 4000),
                    }
                ),
            )
            self.pause()


def _attr(html: bytes, name: bytes) -> str:
    import html as htmllib

    start = html.index(name + b'="') + len(name) + 2
    return htmllib.unescape(html[start : html.index(b'"', start)].decode())


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.times = defaultdict(list)
        self.errors = defaultdict(lambda: defaultdict(int))
        self.notes = defaultdict(int)

    def record(self, kind, seconds):
        with self.lock:
            self.times[kind].append(seconds * 1000)

    def error(self, kind, what):
        with self.lock:
            self.errors[kind][what] += 1

    def note(self, what):
        with self.lock:
            self.notes[what] += 1


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def process_cpu_seconds(pid: int) -> float:
    """user + system CPU of a process and its children (gunicorn master + workers), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pids = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                pids += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


def wait_ready(port, proc, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit("gunicorn exited during start-up")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/accounts/login/", headers={"Host": "127.0.0.1"})
            if c.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("gunicorn did not answer in time")


# --------------------------------------------------------------------------- query counts


def query_counts(slug_big: str):
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from annotation.models import Annotation
    from annotation.services import assignment_claim_next
    from projects.models import Item, Membership, Project

    rows = []
    for slug in (slug_big, "bench-small"):
        project = Project.objects.get(slug=slug)
        user = Membership.objects.filter(project=project, role="annotator").order_by("user_id").first().user
        n_items = Item.objects.filter(project=project).count()
        client = Client()
        client.force_login(user)
        result = assignment_claim_next(annotator=user, project=project)
        item_id = result.annotation.item_id
        page = f"/p/{slug}/annotate/{item_id}/"
        client.get(page)  # first opening writes opened_at once
        a = Annotation.objects.get(item_id=item_id, annotator=user)
        calls = [
            ("page: workspace", "get", page, None),
            ("page: annotate home", "get", f"/p/{slug}/annotate/", None),
            ("partial: progress", "get", f"/p/{slug}/annotate/progress", None),
            ("api: state", "get", f"/api/projects/{slug}/annotate/{item_id}/", None),
            (
                "action: draft",
                "post",
                f"/api/projects/{slug}/annotate/{item_id}/draft",
                {"values": {"label": "harmful"}, "version": a.version, "provenance": {"label": {"letter": "A"}}},
            ),
            (
                "action: submit",
                "post",
                f"/api/projects/{slug}/annotate/{item_id}/submit",
                {"values": {"label": "non-harmful"}, "version": a.version + 1},
            ),
            ("action: next (claim)", "post", f"/p/{slug}/annotate/next", None),
        ]
        for name, method, url, data in calls:
            with CaptureQueriesContext(connection) as ctx:
                if method == "get":
                    r = client.get(url)
                elif data is None:
                    r = client.post(url)
                else:
                    r = client.post(url, data=json.dumps(data), content_type="application/json")
            assert r.status_code in (200, 302), (name, r.status_code, r.content[:300])
            rows.append((name, slug, n_items, len(ctx.captured_queries)))
    return rows


# --------------------------------------------------------------------------- main


def main() -> int:
    args = parse_args()
    env = bench_env(args)
    t0 = time.time()
    create_database(args, env)
    django_setup(env)
    slug, sessions = seed(args)
    print(
        f"setup: database {args.db}, {args.items} items, {args.annotators} annotators in {time.time() - t0:.1f} s",
        flush=True,
    )

    proc = subprocess.Popen(
        [
            str(GUNICORN),
            "concord.wsgi",
            "--bind",
            f"127.0.0.1:{args.port}",
            "--workers",
            str(args.workers),
            "--threads",
            str(args.threads),
            "--worker-class",
            args.worker_class,
            "--keep-alive",
            "30",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    stats = Stats()
    print(f"load average before the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    # Contention on purpose: a process that spins on one core for the whole run (stopped below).
    busy = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdout=subprocess.DEVNULL)
        for _ in range(args.busy)
    ]
    if busy:
        print(f"{len(busy)} busy-loop process(es) running during the measurement", flush=True)
    try:
        wait_ready(args.port, proc)
        measure_from = time.perf_counter() + args.ramp
        deadline = time.time() + args.ramp + args.duration
        rnd = random.Random(args.seed)
        annotators = [
            Annotator(
                args.port,
                s["session"],
                slug,
                random.Random(rnd.random()),
                stats,
                deadline,
                args.max_requests,
                args.think,
                args.ramp,
                measure_from,
            )
            for s in sessions
        ]
        threads = [threading.Thread(target=a.run, daemon=True) for a in annotators]
        start = time.time()
        for t in threads:
            t.start()
        cpu_start = None
        while any(t.is_alive() for t in threads) and time.time() < deadline + 40:
            if cpu_start is None and time.perf_counter() >= measure_from:
                cpu_start, own_start = process_cpu_seconds(proc.pid), time.process_time()
                pg_start = postgres_cpu_seconds(args.db)
            time.sleep(0.2)
        cpu_server = process_cpu_seconds(proc.pid) - (cpu_start or 0.0)
        cpu_pg = postgres_cpu_seconds(args.db) - (pg_start if cpu_start is not None else 0.0)
        cpu_client = time.process_time() - (own_start if cpu_start is not None else 0.0)
        wall = min(time.time(), deadline) - start - args.ramp
    finally:
        for b in busy:
            b.kill()
            b.wait()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()

    total = sum(len(v) for v in stats.times.values())
    print(
        f"\nload: {args.annotators} annotators arriving over {args.ramp:g} s (not measured), then "
        f"think time {args.think:g} s, measured {wall:.1f} s, "
        f"{total} requests = {total / wall:.1f} requests/s "
        f"(gunicorn {args.workers} {args.worker_class} workers x {args.threads} threads, PostgreSQL, 127.0.0.1)"
    )
    print(f"{'kind':10} {'n':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}  errors")
    every = []
    for kind in ("next", "page", "image", "progress", "draft", "submit"):
        v = stats.times.get(kind, [])
        every += v
        if not v:
            continue
        errs = dict(stats.errors.get(kind, {}))
        print(
            f"{kind:10} {len(v):6d} {pct(v, 50):8.1f} {pct(v, 95):8.1f} {pct(v, 99):8.1f} {max(v):8.1f}  {errs or '-'}"
        )
    if every:
        print(
            f"{'all':10} {len(every):6d} {pct(every, 50):8.1f} {pct(every, 95):8.1f} {pct(every, 99):8.1f} "
            f"{max(every):8.1f}"
        )
    if stats.notes:
        print("notes:", dict(stats.notes))
    if total:
        print(
            f"CPU during the measured part: gunicorn {cpu_server:.1f} s = {1000 * cpu_server / total:.1f} ms per request, "
            f"PostgreSQL {cpu_pg:.1f} s = {1000 * cpu_pg / total:.1f} ms per request, "
            f"this load generator {cpu_client:.1f} s"
        )

    from annotation.models import Annotation
    from projects.models import Item

    done = Annotation.objects.filter(item__project__slug=slug, status="submitted").count()
    routed = Item.objects.filter(project__slug=slug).exclude(stage="annotating").count()
    print(f"outcome: {done} annotations submitted, {routed} items completed and routed")

    print("\nqueries per request (in-process, Django test client, session + user lookups included):")
    print(f"{'request':24} {'project':12} {'items':>6} {'queries':>8}")
    for name, p, n, q in query_counts(slug):
        print(f"{name:24} {p:12} {n:6d} {q:8d}")
    print(f"\nmean over all requests: {statistics.mean(every):.1f} ms" if every else "")
    print(
        f"load average after the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs "
        "(shared with anything else running on the machine)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
