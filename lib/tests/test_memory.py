"""lib.memory: free heap pages go back to the OS on glibc (this machine kind, CI)."""

from __future__ import annotations

import platform

import pytest

from lib.memory import release_free_memory


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_release_free_memory_trims_on_glibc():
    junk = [bytes(100) for _ in range(200_000)]  # heap chunks, then free ones
    del junk
    assert release_free_memory() is True
