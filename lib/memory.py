"""Give freed heap memory back to the operating system between the phases of a long job.

glibc keeps what Python and numpy free in its heap (and raises its mmap threshold after a large
array is freed, so the next ones come from the heap too): after reading 2M annotations a
release's agreement part held ~130 MB of free heap pages in its RSS (bench/scale.py).
``malloc_trim(0)`` returns the free pages of every arena; it costs milliseconds. Elsewhere
(macOS, musl) it is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

try:
    _trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    _trim.argtypes, _trim.restype = [ctypes.c_size_t], ctypes.c_int
except (OSError, AttributeError):  # not glibc
    _trim = None


def release_free_memory() -> bool:
    """Return free heap pages to the OS; True when the C library can (glibc). Arrow's own
    allocator (mimalloc, where the Parquet writers' buffers live) is asked too, when pyarrow
    is loaded: it keeps freed pages for reuse."""
    arrow = sys.modules.get("pyarrow")  # loaded by whoever writes Parquet; never imported here
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
    if _trim is None:
        return False
    _trim(0)
    return True
