"""Pause Python's cyclic garbage collector around bulk work on millions of acyclic objects.

A read of a 1M-item project creates millions of row tuples and strings. Each allocation burst
triggers the collector, and its oldest-generation passes walk every live object, so the cost
grows faster than the data: at 1M aha items (3M annotation rows) the column read of the
agreement report spent 9.4 of its 16.7 CPU seconds in the collector (bench/scale.py, measured
with and without). Reference counting still frees everything as usual; only cycles wait until
the collector resumes. Nested use is fine: only the outermost pause re-enables it.
"""

from __future__ import annotations

import gc
from contextlib import ContextDecorator


class gc_paused(ContextDecorator):
    def __enter__(self):
        self._was_enabled = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc):
        if self._was_enabled:
            gc.enable()
        return False
