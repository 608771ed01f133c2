"""Progress of a build: throttled calls of the job's progress writer."""

from __future__ import annotations

import time
from collections.abc import Callable

PROGRESS_EVERY_SECONDS = 0.5
#: Rows read from the database per round trip (server-side iteration).
READ_CHUNK = 2000

Progress = Callable[[str, int, int], None]  # (phase, done, total)


class _Ticker:
    """Calls ``progress`` at most every PROGRESS_EVERY_SECONDS (each call is a DB write)."""

    def __init__(self, progress: Progress, total: int):
        self.progress, self.total, self.last = progress, total, 0.0

    def due(self) -> bool:
        """Whether a call now would report (to skip computing ``done`` when it would not)."""
        return time.monotonic() - self.last >= PROGRESS_EVERY_SECONDS

    def __call__(self, phase: str, done: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= PROGRESS_EVERY_SECONDS:
            self.last = now
            self.progress(phase, min(done, self.total), self.total)
