"""Helpers shared by the benches: RSS sampling, PostgreSQL CPU accounting, synthetic words.

Imported as ``bench.common`` (the repository root on ``sys.path``, not the bench folder, which
would shadow the ``quality`` app with bench/quality.py).
"""

from __future__ import annotations

import contextlib
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


def _pss(pid: int) -> int:
    """Proportional set size in bytes (Linux /proc/<pid>/smaps_rollup)."""
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


class RssSampler:
    """Peak resident set size of this process and its child processes (a release build forks
    one part: core.forked) while the block runs, sampled every 50 ms, with the block's wall and
    CPU time (this process, plus the children it waited for). Sizes are proportional (PSS, the
    resident size with each shared page divided among the processes sharing it), so a forked
    child's copy-on-write pages are not counted twice."""

    def __init__(self) -> None:
        self.proc = psutil.Process()

    #: Seconds between samples, and samples between scans for child processes: a sample is
    #: ~0.2 ms of /proc reading per process and a scan ~0.6 ms, in a thread of the measured
    #: process (at every 10 ms with a scan each time they took ~10% of a core from it).
    EVERY = 0.05
    SCAN_EVERY = 10

    def _rss(self, scan: bool = True) -> int:
        # Proportional set sizes, so the pages a forked child shares with this process (copy-on-
        # write) are counted once in the sum, not once per process.
        if scan or not hasattr(self, "_children"):
            self._children = self.proc.children(recursive=True)
        own = _pss(self.proc.pid)
        total = own
        for child in self._children:
            with contextlib.suppress(psutil.Error, OSError):
                total += _pss(child.pid)
        self._last = (own, total - own)
        return total

    def _sample(self, scan: bool) -> None:
        total = self._rss(scan)
        if self._timeline is not None:
            self._timeline.write(
                f"{time.perf_counter() - self.t0:.2f} {self._last[0] / MB:.0f} {self._last[1] / MB:.0f}\n"
            )
        if total > self.peak:
            # Where the peak is: when (s into the block), and this process's share of it.
            self.peak, self.peak_at, self.peak_parts = total, time.perf_counter() - self.t0, self._last

    @property
    def peak_text(self) -> str:
        """The peak's growth split into this process and its children, and when it was."""
        own, children = self.peak_parts
        return (
            f"peak at {self.peak_at:.0f} s: this process +{(own - self.base_parts[0]) / MB:,.0f} MB, "
            f"children {children / MB:,.0f} MB"
        )

    def __enter__(self):
        # BENCH_RSS_TIMELINE=path: every sample as "seconds own_MB children_MB" (where a peak is).
        path = os.environ.get("BENCH_RSS_TIMELINE")
        self._timeline = open(path, "a", buffering=1) if path else None
        self.base = self._rss()
        self.base_parts = self._last
        self.peak, self.peak_at, self.peak_parts = self.base, 0.0, self._last
        self.t0 = time.perf_counter()
        self._children0 = os.times()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def _run(self) -> None:
        k = 0
        while not self._stop.wait(self.EVERY):
            self._sample(scan=k % self.SCAN_EVERY == 0)
            k += 1

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.t0
        t1 = os.times()
        children = (t1.children_user - self._children0.children_user) + (
            t1.children_system - self._children0.children_system
        )
        self.cpu = time.process_time() - self.c0 + children
        self._stop.set()
        self._thread.join()
        self._sample(scan=True)
        if self._timeline is not None:
            self._timeline.close()

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.base) / MB


class PostgresCpu:
    """CPU of the PostgreSQL backends serving ``db`` while the block runs, backends that start
    and end inside it included (a forked part opens and closes its own connection): every
    backend's CPU is sampled every 100 ms, and the last sample of each counts, minus what a
    backend alive at the start had already used."""

    def __init__(self, db: str):
        self.db = db

    def __enter__(self):
        self.start = _postgres_backend_cpu(self.db)
        self.last = dict(self.start)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.last.update(_postgres_backend_cpu(self.db))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.last.update(_postgres_backend_cpu(self.db))
        self.seconds = sum(cpu - self.start.get(pid, 0.0) for pid, cpu in self.last.items())


def _postgres_backend_cpu(db: str) -> dict[int, float]:
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
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
            out[int(pid)] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            continue
    return out


def postgres_cpu_seconds(db: str) -> float:
    """CPU (user + system) of the PostgreSQL backends serving ``db``, found by their process
    title; only backends alive now count, so measure with one long-lived connection (or
    :class:`PostgresCpu`, which follows backends that come and go)."""
    return sum(_postgres_backend_cpu(db).values())
