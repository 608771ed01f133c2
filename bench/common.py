"""Helpers shared by the benches: RSS sampling, PostgreSQL CPU accounting, synthetic words.

Imported as ``bench.common`` (the repository root on ``sys.path``, not the bench folder, which
would shadow the ``quality`` app with bench/quality.py).
"""

from __future__ import annotations

import os
import threading
import time

import psutil

MB = 1024 * 1024
WORDS = (
    "when",
    "the",
    "people",
    "from",
    "planet",
    "zorg",
    "arrive",
    "late",
    "again",
    "monday",
    "coffee",
    "meeting",
    "cats",
    "think",
    "they",
    "own",
    "the",
    "house",
    "nobody",
    "asked",
    "for",
    "this",
)
CATEGORIES = ("group background", "religion and caste", "gender", "health condition")


class RssSampler:
    """Peak resident set size of this process while the block runs, sampled every 10 ms, with
    the block's wall and process CPU time."""

    def __init__(self) -> None:
        self.proc = psutil.Process()

    def __enter__(self):
        self.base = self.proc.memory_info().rss
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.t0
        self.cpu = time.process_time() - self.c0
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.base) / MB


def postgres_cpu_seconds(db: str) -> float:
    """CPU (user + system) of the PostgreSQL backends serving ``db``, found by their process
    title; only backends alive now count, so measure with one long-lived connection."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                title = fh.read().replace(b"\0", b" ").decode(errors="replace")
            if not title.startswith("postgres:") or f" {db} " not in title:
                continue
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            continue
    return total
