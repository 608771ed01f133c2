"""Benchmark of an import fanned out over Celery worker processes (issue 18, deliverable 3).

    .venv/bin/python bench/workers.py [--items 20000] [--workers 1,2] [--db concord_bench_workers]
                                      [--redis redis://127.0.0.1:6379/9] [--ocr]

What it does, all on 127.0.0.1:
1. (re)creates its own PostgreSQL database (``--db``) and var folder (``/tmp/<db>``) and
   migrates it;
2. generates ONE zip of ``--items`` distinct 320x240 JPEG images (a two-colour gradient, six
   random shapes and mild noise, a different seed each: 12-18 KB) and a ``manifest.jsonl``
   (image, text, source_id), cached under ``/tmp/concord-bench-workers-cache`` by its
   parameters, so a rerun does not generate it again;
3. for each N in ``--workers``: flushes its Redis database, empties the media folder (images
   are content-addressed: a second run would otherwise skip writing them), creates a fresh
   meme3w project (``projects.services.project_create``), starts N Celery worker processes
   (``celery -A concord worker --pool prefork --concurrency 1``, production settings through
   DATABASE_URL / REDIS_URL / CELERY_BROKER_URL / CONCORD_VAR_DIR), waits until all N answer a
   ``ping``, saves the upload (``projects.imports.upload_save``, not timed: that is the web
   request's part), creates the ImportJob and sends ``projects.import_items`` (timed from
   here), polls the job until it ends, and stops the workers (SIGTERM, warm shutdown);
4. checks that every run imported exactly ``--items`` items, 0 refused, 0 duplicates, 0 already
   present (exit status 1 otherwise) and prints wall time, items/s, the CPU seconds of the
   worker processes (main process + pool child, psutil, from "ready" to "job done"), the
   planning phase (manifest read into chunks, from the job row's timestamps) and the speed-up
   of the largest N over N=1 (goal >= 1.7x for 2 workers on 2 cores).

The speed-up is only meaningful on a quiet machine: the load average before and after each run
is printed. Figures only, no assertions on time.

Measured on the 2-core kind while other test suites ran (load average 2.9-7.0), 20,000 images:
1 worker 470.9 s (42 items/s), 2 workers 276.6 s (72 items/s), 1.70x; worker CPU 9.4-9.6 ms per
image either way; planning (the serial part) 0.9-4.1 s.

Quiet machine (load average < 1), 2026-12-01 late evening: 5,000 images, 1 worker 38.9 s (129
items/s, 26.5 s worker CPU: one process at concurrency 1 is busy only ~68% of the time, waiting
on PostgreSQL and file writes), 2 workers 15.9 s (314 items/s), 2.45x: two processes also overlap
those waits. ``--ocr`` over 200 images (8 chunks of projects.ocr.CHUNK_ITEMS): 1 worker 70.0 s
(338 ms CPU per image), 2 workers 32.8 s, 2.14x; 200/200 results each time.

2026-12-03, another machine of this kind, quiet: 20,000 images, 1 worker 106.6 s (188 items/s,
78.7 s worker CPU), 2 workers 57.4 s (348 items/s), 1.86x; ``--items 200 --ocr``: 1 worker
65.0 s (321 ms CPU per image), 2 workers 34.5 s, 1.89x, 200/200 results each time (the import of
200 items is one chunk: no speed-up there, as expected).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import io
import json
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
PY = Path(sys.executable)
CACHE = Path("/tmp/concord-bench-workers-cache")
IMAGE_VERSION = 1  # bump when the generated images change (the cache key)
H, W = 240, 320
GOAL = 1.7


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=20000)
    p.add_argument("--workers", default="1,2", help="comma-separated worker process counts, one run each")
    p.add_argument("--db", default="concord_bench_workers")
    p.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/9")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds one import may take")
    p.add_argument(
        "--ocr",
        action="store_true",
        help="after each import, also OCR every imported item with the same workers (timed apart); "
        "OCR costs ~0.1-0.4 s per image, so use a few hundred --items",
    )
    args = p.parse_args()
    args.counts = [int(n) for n in args.workers.split(",") if n.strip()]
    if not args.counts or min(args.counts) < 1 or args.items < 1:
        p.error("--workers needs counts >= 1 and --items >= 1")
    return args


# --------------------------------------------------------------------------- set-up


def bench_env(args) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "CONCORD_"))}
    env.update(
        {
            "DATABASE_URL": f"{args.pg}/{args.db}",
            "REDIS_URL": args.redis,
            "CELERY_BROKER_URL": args.redis,
            "CONCORD_VAR_DIR": f"/tmp/{args.db}",
            "CELERY_TASK_ALWAYS_EAGER": "0",
            "DEBUG": "0",
            "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "concord.settings",
            "PYTHONPATH": str(ROOT),
        }
    )
    return env


def create_database(args, env) -> None:
    import psycopg

    var = Path(env["CONCORD_VAR_DIR"])
    shutil.rmtree(var, ignore_errors=True)
    var.mkdir(parents=True)
    with psycopg.connect(f"{args.pg}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{args.db}"')
    subprocess.run([str(PY), "manage.py", "migrate", "--no-input", "-v", "0"], cwd=ROOT, env=env, check=True)


def django_setup(env) -> None:
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


# --------------------------------------------------------------------------- the upload


def image_maker():
    """``make(seed) -> JPEG bytes``: distinct pixels per seed, ~15 KB, ~5 ms each."""
    import numpy as np
    from PIL import Image, ImageDraw

    noise = np.random.default_rng(12345).normal(0, 10, (2 * H, 2 * W, 3)).astype(np.float32)
    yy = np.linspace(0, 1, H, dtype=np.float32)[:, None, None]
    xx = np.linspace(0, 1, W, dtype=np.float32)[None, :, None]

    def make(seed: int) -> bytes:
        rng = np.random.default_rng(seed)
        c0, c1 = rng.integers(0, 256, 3).astype(np.float32), rng.integers(0, 256, 3).astype(np.float32)
        a, b = rng.uniform(0.2, 1.0, 2).astype(np.float32)
        oy, ox = int(rng.integers(0, H)), int(rng.integers(0, W))
        arr = c0 + (c1 - c0) * ((xx * a + yy * b) / (a + b)) + noise[oy : oy + H, ox : ox + W]
        img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
        draw = ImageDraw.Draw(img)
        for _ in range(6):
            x, y, r = int(rng.integers(0, W)), int(rng.integers(0, H)), int(rng.integers(10, 60))
            fill = tuple(int(v) for v in rng.integers(0, 256, 3))
            (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x - r, y - r, x + r, y + r), fill=fill)
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=85)
        return buf.getvalue()

    return make


def upload_zip(args) -> tuple[Path, float]:
    """The cached zip for these parameters (generated once), and its generation time (0 when cached)."""
    path = CACHE / f"items-{args.items}-seed{args.seed}-v{IMAGE_VERSION}.zip"
    if path.exists():
        return path, 0.0
    CACHE.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    make = image_maker()
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:  # JPEGs do not compress
        rows = []
        for i in range(args.items):
            name = f"images/img_{i:06d}.jpg"
            z.writestr(name, make(args.seed * 10_000_019 + i))
            rows.append({"image": name, "text": f"Bench meme {i}: the people from Planet Zorg", "source_id": f"bw{i}"})
        z.writestr(
            "manifest.jsonl",
            "".join(json.dumps(r) + "\n" for r in rows),
            compress_type=zipfile.ZIP_DEFLATED,
        )
    os.replace(tmp, path)
    return path, time.perf_counter() - t0


# --------------------------------------------------------------------------- workers


def start_workers(n: int, run: str, env: dict, log: Path) -> list[subprocess.Popen]:
    procs = []
    for i in range(n):
        args = [str(PY), "-m", "celery", "-A", "concord", "worker", "--pool", "prefork", "--concurrency", "1"]
        args += ["-Q", "celery", "-l", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"]
        args += ["-n", f"bw-{run}-{i}@%h"]
        procs.append(
            subprocess.Popen(
                args, cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
            )
        )
    return procs


def wait_ready(procs: list[subprocess.Popen], run: str, log: Path, timeout: float = 120.0) -> None:
    """Until every worker answers a remote-control ping (its consumer is up)."""
    from concord.celery import app

    want = {f"bw-{run}-{i}" for i in range(len(procs))}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        replies = app.control.ping(timeout=1.0) or []
        seen = {name.split("@")[0] for reply in replies for name in reply}
        if want <= seen:
            return
    stop_workers(procs)
    raise SystemExit(f"workers did not become ready; log tail:\n{log.read_text(errors='replace')[-3000:]}")


def cpu_seconds(procs: list[subprocess.Popen]) -> float:
    """User + system CPU of each worker and its pool children (alive or reaped)."""
    total = 0.0
    for p in procs:
        try:
            proc = psutil.Process(p.pid)
            family = [proc, *proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for member in family:
            try:
                t = member.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += t.user + t.system + t.children_user + t.children_system
    return total


def stop_workers(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)  # warm shutdown of the worker and its pool
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


def end_leftover_jobs() -> None:
    """Jobs the import started (the near-duplicate scan) must not run in the next measurement."""
    from django.utils import timezone

    from core.jobs import job_models
    from core.models import ACTIVE, JobStatus

    for model in job_models():
        model.objects.filter(status__in=ACTIVE).update(
            status=JobStatus.CANCELLED, cancel_requested=True, finished_at=timezone.now(), error="bench: ended"
        )


# --------------------------------------------------------------------------- one run


def one_run(args, env, n: int, index: int, archive: Path, log: Path) -> dict:
    import redis
    from django.conf import settings
    from django.core.files import File
    from django.db import transaction

    from core.jobs import job_enqueue
    from projects.imports import import_job_create, upload_save
    from projects.models import ImportChunk, Item
    from projects.services import project_create

    redis.Redis.from_url(args.redis).flushdb()
    shutil.rmtree(Path(settings.MEDIA_ROOT) / "images", ignore_errors=True)
    project = project_create(name=f"Bench workers {n}", slug=f"bench-w{n}-{index}", preset="meme3w")
    run = f"{n}w{index}"
    load_before = os.getloadavg()
    procs = start_workers(n, run, env, log)
    try:
        wait_ready(procs, run, log)
        cpu0 = cpu_seconds(procs)
        with archive.open("rb") as fh:
            upload = upload_save(uploaded_file=File(fh, name=archive.name))
        t0 = time.perf_counter()
        with transaction.atomic():
            job = import_job_create(project=project, user=None, source_name=archive.name, upload_path=upload)
            job_enqueue(job)  # the task is sent when this commits
        wait_finished(job, procs, args.timeout, f"import of {n} worker(s)", log)
        wall = time.perf_counter() - t0
        cpu = cpu_seconds(procs) - cpu0
        ocr = ocr_run(args, project, procs, log) if args.ocr else None
    finally:
        stop_workers(procs)
    load_after = os.getloadavg()
    end_leftover_jobs()
    chunks = ImportChunk.objects.filter(job=job)
    first_chunk = chunks.order_by("first_started_at").values_list("first_started_at", flat=True).first()
    plan = (first_chunk - job.started_at).total_seconds() if first_chunk and job.started_at else float("nan")
    queued = (job.started_at - job.created_at).total_seconds() if job.started_at else float("nan")
    items = Item.objects.filter(project=project)
    return {
        "workers": n,
        "wall": wall,
        "cpu": cpu,
        "plan": plan,
        "queued": queued,
        "chunks": chunks.count(),
        "status": job.status,
        "error": job.error,
        "imported": job.imported,
        "refused": job.refused,
        "duplicates": job.exact_duplicates,
        "present": job.already_present,
        "items": items.count(),
        "distinct_pixels": items.values("pixel_hash").distinct().count(),
        "load_before": load_before,
        "load_after": load_after,
        "ocr": ocr,
    }


def wait_finished(job, procs, timeout: float, what: str, log: Path) -> None:
    """Poll the job row until it ended; exit when it takes too long or every worker died."""
    deadline = time.monotonic() + timeout
    while True:
        job.refresh_from_db()
        if job.finished:
            return
        if time.monotonic() > deadline or all(p.poll() is not None for p in procs):
            raise SystemExit(f"{what} did not end (status {job.status}); see {log}")
        time.sleep(0.05)


def ocr_run(args, project, procs, log: Path) -> dict:
    """OCR of every imported item (projects.ocr: chunks of CHUNK_ITEMS, one task each), timed
    from the job's creation to its end; exact when every item has exactly one result."""
    from projects.models import ItemOcr, OcrChunk
    from projects.ocr import ocr_job_start

    cpu0 = cpu_seconds(procs)
    t0 = time.perf_counter()
    job = ocr_job_start(project=project)
    wait_finished(job, procs, args.timeout, "OCR run", log)
    return {
        "wall": time.perf_counter() - t0,
        "cpu": cpu_seconds(procs) - cpu0,
        "status": job.status,
        "items_read": job.items_read,
        "results": ItemOcr.objects.filter(item__project=project).count(),
        "chunks": OcrChunk.objects.filter(job=job).count(),
    }


def main() -> int:
    args = parse_args()
    env = bench_env(args)
    print(f"bench/workers.py: {args.items:,} images, worker processes {args.counts}, {os.cpu_count()} CPU(s)")
    print(
        "NOTE: the speed-up is only meaningful on a quiet machine (2 workers need both cores); "
        "compare the load averages below."
    )
    create_database(args, env)
    django_setup(env)
    archive, generated = upload_zip(args)
    size = archive.stat().st_size
    how = f"generated in {generated:.1f} s" if generated else "cached"
    print(f"upload: {archive} ({size / 1e6:.1f} MB, {size / args.items / 1e3:.1f} KB per image, {how})")
    log = Path(env["CONCORD_VAR_DIR"]) / "workers.log"

    results, ok = [], True
    for index, n in enumerate(args.counts):
        r = one_run(args, env, n, index, archive, log)
        results.append(r)
        exact = (
            r["status"] == "done"
            and r["imported"] == args.items
            and r["items"] == args.items
            and r["distinct_pixels"] == args.items
            and (r["refused"], r["duplicates"], r["present"]) == (0, 0, 0)
        )
        ok &= exact
        print(
            f"  {n} worker(s): job {r['status']}, {r['imported']:,} imported, {r['refused']} refused, "
            f"{r['duplicates']} duplicates, {r['present']} already present, {r['items']:,} items "
            f"({r['distinct_pixels']:,} distinct pixel hashes), {r['chunks']} chunks: "
            f"{'OK' if exact else 'WRONG'}" + (f" ({r['error'][:300]})" if r["error"] else "")
        )

    print()
    print(
        f"{'workers':>7} {'wall s':>8} {'items/s':>8} {'worker CPU s':>12} {'CPU ms/item':>11} "
        f"{'queued s':>8} {'planning s':>10} {'load before':>16} {'load after':>16}"
    )
    for r in results:
        lb = "/".join(f"{v:.2f}" for v in r["load_before"])
        la = "/".join(f"{v:.2f}" for v in r["load_after"])
        print(
            f"{r['workers']:>7} {r['wall']:8.1f} {args.items / r['wall']:8.0f} {r['cpu']:12.1f} "
            f"{1000 * r['cpu'] / args.items:11.2f} {r['queued']:8.2f} {r['plan']:10.2f} {lb:>16} {la:>16}"
        )
    if args.ocr:
        print()
        print(
            f"{'workers':>7} {'OCR wall s':>10} {'items/s':>8} {'worker CPU s':>12} {'CPU ms/item':>11} {'chunks':>6}"
        )
        for r in results:
            o = r["ocr"]
            ok &= o["status"] == "done" and o["items_read"] == o["results"] == args.items
            print(
                f"{r['workers']:>7} {o['wall']:10.1f} {args.items / o['wall']:8.1f} {o['cpu']:12.1f} "
                f"{1000 * o['cpu'] / args.items:11.1f} {o['chunks']:>6}  {o['status']}, {o['results']} results"
            )
        ocr_base = next((r for r in results if r["workers"] == 1), None)
        for r in results:
            if ocr_base is not None and r["workers"] > 1:
                print(
                    f"OCR speed-up of {r['workers']} workers over 1: {ocr_base['ocr']['wall'] / r['ocr']['wall']:.2f}x"
                )
    base = next((r for r in results if r["workers"] == 1), None)
    if base is not None:
        for r in results:
            if r["workers"] > 1:
                speed = base["wall"] / r["wall"]
                verdict = "meets" if speed >= GOAL else "below"
                goal = f" (goal >= {GOAL}x on 2 cores: {verdict})" if r["workers"] == 2 else ""
                print(f"speed-up of {r['workers']} workers over 1: {speed:.2f}x{goal}")
    print(
        f"load average (1/5/15 min) at the end: {'/'.join(f'{v:.2f}' for v in os.getloadavg())}; "
        f"figures measured on a busy machine understate the speed-up"
    )
    if not ok:
        print("FAIL: at least one run did not import exactly the items of the upload")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
