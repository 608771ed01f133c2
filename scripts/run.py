"""`make run`: migrate, load the demo, then run the web server and a Celery worker (with beat) together.

Ctrl-C (or SIGTERM) stops both; if either exits, the other is stopped too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def manage(*args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, check=True)


def main() -> int:
    os.chdir(ROOT)
    var_dir = Path(os.environ.get("CONCORD_VAR_DIR", ROOT / "var"))
    var_dir.mkdir(parents=True, exist_ok=True)
    host = os.environ.get("HOST", "127.0.0.1")
    port = os.environ.get("PORT", "8000")
    backend = (
        "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite (var/concord.sqlite3)"
    )
    broker = "Redis" if os.environ.get("REDIS_URL") else "filesystem broker (var/broker)"
    print(f"Concord: database {backend}, Celery broker {broker}", flush=True)
    manage("migrate", "--no-input", "-v", "0")
    manage("collectstatic", "--no-input", "-v", "0")
    manage("load_demo")
    procs = [
        subprocess.Popen(
            [
                str(BIN / "gunicorn"),
                "concord.wsgi",
                "--bind",
                f"{host}:{port}",
                "--workers",
                "3",
                # gthread, 2 threads each: bench/annotate_load.py measured p95 64 ms with 3 x 2
                # on 2 CPUs where 4 x 4 gave 193 ms (more threads only add GIL contention).
                "--threads",
                "2",
                "--access-logfile",
                "-",
                "--timeout",
                "120",
            ]
        ),
        subprocess.Popen(
            [
                str(BIN / "celery"),
                "-A",
                "concord",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                os.environ.get("WORKER_CONCURRENCY", "2"),
                # Celery beat inside the worker: the job sweeper (README "Jobs"). One beat per
                # deployment; docker-compose runs it as its own service instead.
                "--beat",
                "--schedule",
                str(var_dir / "celerybeat-schedule"),
            ]
        ),
    ]

    def stop(*_):
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.time() + 10
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()

    signal.signal(signal.SIGTERM, lambda *a: (stop(), sys.exit(0)))
    print(
        f"\n  Concord is running at http://{host}:{port}/  (API docs: /api/docs/)\n"
        "  Web server and Celery worker started; Ctrl-C stops both.\n",
        flush=True,
    )
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        print("A process exited; stopping the other.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        stop()


if __name__ == "__main__":
    sys.exit(main())
