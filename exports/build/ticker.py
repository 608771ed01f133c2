"""Progress of a build: throttled calls of the job's progress writer."""

from __future__ import annotations

import time
from collections.abc import Callable

from lib.memory import release_free_memory

PROGRESS_EVERY_SECONDS = 0.5
TRIM_EVERY_SECONDS = 5.0
#: Rows read from the database per round trip (server-side iteration).
READ_CHUNK = 2000

Progress = Callable[[str, int, int], None]  # (phase, done, total)


class _Ticker:
    """Calls ``progress`` at most every PROGRESS_EVERY_SECONDS (each call is a DB write)."""

    def __init__(self, progress: Progress, total: int):
        self.progress, self.total, self.last = progress, total, 0.0
        self.trimmed = time.monotonic()

    def due(self) -> bool:
        """Whether a call now would report (to skip computing ``done`` when it would not)."""
        return time.monotonic() - self.last >= PROGRESS_EVERY_SECONDS

    def __call__(self, phase: str, done: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= PROGRESS_EVERY_SECONDS:
            self.last = now
            self.progress(phase, min(done, self.total), self.total)
        if now - self.trimmed >= TRIM_EVERY_SECONDS:
            # A streaming part's free heap pages back to the OS as it goes: its rows, lines
            # and batches come and go in every size, and glibc kept ~60 MB of them (1M items).
            # Not at every report: a trim costs ~20 ms and the pages it frees fault back in.
            self.trimmed = now
            release_free_memory()
