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
    """Proportional set size in bytes (Linux /proc/<pid>/smaps_rollup: the kernel walks the
    process's page tables, ~15 ms for a 900 MB heap of Python objects)."""
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def _rss(pid: int) -> int:
    """Resident set size in bytes (VmRSS of /proc/<pid>/status: a counter, ~20 us)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class RssSampler:
    """Peak memory of this process and its child processes (a release build forks one part:
    core.forked) while the block runs, with the block's wall and CPU time (this process, plus
    the children it waited for, minus the sampler's own thread).

    Sizes are proportional (PSS: the resident size with each shared page divided among the
    processes sharing it), so a forked child's copy-on-write pages are not counted twice. PSS
    is costly to read (the kernel walks the page tables: at a 1M-item release's sizes, reading
    both processes every 50 ms took ~40% of a core and made the release 145 s instead of 96 s,
    bench/scale.py), so it is read once a second and whenever the set of processes changes;
    every 50 ms in between, the cheap resident sizes (RSS counters) are read, and each such
    sample counts as its RSS minus its process's RSS - PSS difference at the next PSS
    reading. That difference (the pages it shares, in part) only shrinks while no process
    forks (shared pages get written or freed), so each estimate is an upper bound of its PSS.
    Two exceptions: a sample taken before a fork the next reading sees counts as plain RSS,
    and one taken before a process ended that the next reading no longer sees counts every
    process with its last reading's difference (there, an estimate: not a bound).
    """

    #: Seconds between samples, samples between PSS readings and between scans for children.
    EVERY = 0.05
    PSS_EVERY = 20
    SCAN_EVERY = 10

    def __init__(self) -> None:
        self.proc = psutil.Process()

    def _pids(self, scan: bool) -> list[int]:
        if scan or not hasattr(self, "_children"):
            self._children = self.proc.children(recursive=True)
        return [self.proc.pid] + [c.pid for c in self._children]

    def _read(self, pids: list[int], *, pss: bool) -> tuple[float, dict[int, int], dict[int, int] | None]:
        """(time, {pid: RSS}, {pid: RSS - PSS} or None): processes that ended meanwhile are left out."""
        t = time.perf_counter()
        rss, offsets = {}, ({} if pss else None)
        for pid in pids:
            with contextlib.suppress(OSError):
                rss[pid] = _rss(pid)
                if pss:
                    offsets[pid] = rss[pid] - _pss(pid)
        return t, rss, offsets

    def _resolve(self, offsets: dict[int, int]) -> None:
        """Count the samples taken since the last PSS reading, now that the next one is in."""
        last = len(self._pending) - 1
        for k, (t, rss) in enumerate(self._pending):
            forked = offsets.keys() - rss.keys()  # a process started after this sample
            ended = rss.keys() - offsets.keys()  # and one that ended after it
            parts = {}
            for pid, size in rss.items():
                if forked:
                    parts[pid] = size  # its parent's shared pages grew since: plain RSS
                elif ended:
                    # The survivors' next difference no longer holds the pages they shared with
                    # the one that ended: with it, the ended process's share counted twice (a
                    # false +95 MB at the end of a 1M-item release's forked part). Every process
                    # takes its last reading's difference; one that is exiting, at most its RSS.
                    parts[pid] = max(0, size - self._offsets.get(pid, 0))
                else:
                    parts[pid] = size - offsets[pid]
            self._count(t, parts, exact=k == last)
        self._pending.clear()
        self._offsets = offsets

    def _count(self, t: float, parts: dict[int, int], exact: bool) -> None:
        own = parts.get(self.proc.pid, 0)
        total = sum(parts.values())
        if self._timeline is not None:
            mark = " pss" if exact else ""  # a PSS reading, not an estimate
            self._timeline.write(f"{t - self.t0:.2f} {own / MB:.0f} {(total - own) / MB:.0f}{mark}\n")
        if total > self.peak:
            # Where the peak is: when (s into the block), and this process's share of it.
            self.peak, self.peak_at, self.peak_parts = total, t - self.t0, (own, total - own)

    def _sample(self, *, scan: bool, pss: bool) -> None:
        pids = self._pids(scan)
        if pids != self._last_pids:  # a child started or ended: read PSS now, for the new set
            pss, self._last_pids = True, pids
        t, rss, offsets = self._read(pids, pss=pss)
        self._pending.append((t, rss))
        if offsets is not None:
            self._resolve(offsets)

    @property
    def peak_text(self) -> str:
        """The peak's growth split into this process and its children, and when it was."""
        own, children = self.peak_parts
        return (
            f"peak at {self.peak_at:.0f} s: this process +{(own - self.base_parts[0]) / MB:,.0f} MB, "
            f"children {children / MB:,.0f} MB"
        )

    def __enter__(self):
        # BENCH_RSS_TIMELINE=path: every sample as "seconds own_MB children_MB" (where a peak is),
        # "pss" after the PSS readings (the others are estimates, see the class docstring).
        path = os.environ.get("BENCH_RSS_TIMELINE")
        self._timeline = open(path, "a", buffering=1) if path else None
        self.t0 = time.perf_counter()
        self._last_pids = self._pids(True)
        _, rss, offsets = self._read(self._last_pids, pss=True)
        own = rss[self.proc.pid] - offsets[self.proc.pid]
        self.base = sum(rss.values()) - sum(offsets.values())
        self.base_parts = (own, self.base - own)
        self.peak, self.peak_at, self.peak_parts = self.base, 0.0, self.base_parts
        self._pending: list[tuple[float, dict[int, int]]] = []
        self._offsets = offsets
        self._children0 = os.times()
        self._stop = threading.Event()
        self._sampler_cpu = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def _run(self) -> None:
        c0 = time.thread_time()
        k = 1
        while not self._stop.wait(self.EVERY):
            self._sample(scan=k % self.SCAN_EVERY == 0, pss=k % self.PSS_EVERY == 0)
            k += 1
        self._sampler_cpu = time.thread_time() - c0

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.t0
        t1 = os.times()
        children = (t1.children_user - self._children0.children_user) + (
            t1.children_system - self._children0.children_system
        )
        cpu = time.process_time() - self.c0 + children
        self._stop.set()
        self._thread.join()
        self.cpu = cpu - self._sampler_cpu  # what the block used, not its measurement
        self._sample(scan=True, pss=True)
        if self._timeline is not None:
            self._timeline.close()

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.base) / MB


class PostgresCpu:
    """CPU of the PostgreSQL backends serving ``db`` while the block runs, backends that start
    and end inside it included (a forked part opens and closes its own connection): every
    backend's CPU is sampled every 100 ms, and the last sample of each counts, minus what a
    backend alive at the start had already used. ``sampler_cpu``: the CPU its own sampling
    thread used (in the measuring process: subtract it from that process's CPU)."""

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
        c0 = time.thread_time()
        while not self._stop.wait(0.1):
            self.last.update(_postgres_backend_cpu(self.db))
        self.sampler_cpu = time.thread_time() - c0

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
