"""Run one part of a job in a forked process, beside the rest, on another core.

A release build is two independent halves (exports.build.release): the records, and the
annotations, candidates and agreement figures. Both are Python-bound, so threads would share
one core; a forked child has its own interpreter and reads the database over its own
connection. Its result comes back pickled through a pipe.

Only where it is safe: PostgreSQL (a forked child cannot see an SQLite test database held in
memory) and outside a transaction (a child would not see uncommitted rows), with ``os.fork``.
Work either process may do (the parts of a release's candidates, each taken by whichever
half is free) is :class:`Claims`: numbers in a pipe made before the fork, one read each.

Django's connections are closed before the fork, and the child forgets any it still
inherited, so that parent and child each talk over their own (a shared socket would mix
their conversations). The child leaves with ``os._exit``: no inherited clean-up (Celery's,
atexit, connection finalizers) runs twice.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import traceback
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection, connections


class ForkedPartFailed(RuntimeError):
    """The forked part raised (its message and traceback are in the text) or died."""


def fork_possible() -> bool:
    return (
        hasattr(os, "fork")
        and getattr(settings, "JOB_PARTS_IN_PARALLEL", True)
        and connection.vendor == "postgresql"
        and not any(c.in_atomic_block for c in connections.all(initialized_only=True))
    )


#: Database connections a child inherited: kept referenced and never used or closed, so no
#: message of the child's (not even the goodbye a closed connection sends) reaches a socket
#: the parent still talks over; ``os._exit`` then leaves without finalizers.
_INHERITED: list = []


def _drop_inherited_connections() -> None:
    """In a child: forget every connection the parent had open (the parent closes its own
    before forking, but a connection it could not close, e.g. one a test framework keeps,
    would otherwise be shared); Django opens the child's own on its first query."""
    for conn in connections.all():
        if conn.connection is not None:
            _INHERITED.append(conn.connection)
            conn.connection = None


class Forked:
    """``Forked(fn, *args, **kwargs)`` starts ``fn`` in a child process; ``result()`` waits for
    it and returns its value or raises ForkedPartFailed; ``stop()`` kills a child still running
    (the parent failed or was cancelled)."""

    def __init__(self, fn: Callable[..., Any], *args, **kwargs):
        connections.close_all()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            os.close(read)
            _drop_inherited_connections()
            code = 0
            try:
                try:
                    outcome = ("ok", fn(*args, **kwargs))
                except BaseException as exc:  # reported to the parent, which raises
                    outcome = ("error", f"{type(exc).__name__}: {exc}", traceback.format_exc())
                try:
                    data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
                except Exception as exc:
                    data = pickle.dumps(("error", f"the part's result cannot be sent: {exc}", ""))
                with os.fdopen(write, "wb") as fh:
                    fh.write(data)
                connections.close_all()
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(write)
        self.pid, self._read, self._done = pid, read, False

    def result(self, *, waiting: Callable[[], None] | None = None, every: float = 1.0) -> Any:
        """The part's value, once it ends; ``waiting()`` is called every ``every`` seconds
        meanwhile (the job's heartbeat and cancel check: it may raise, and the caller then
        stops the part)."""
        blocks = []
        while True:
            ready, _, _ = select.select([self._read], [], [], every)
            if ready:
                block = os.read(self._read, 1 << 20)
                if not block:
                    break
                blocks.append(block)
            elif waiting is not None:
                waiting()
        os.close(self._read)
        data = b"".join(blocks)
        _, status = os.waitpid(self.pid, 0)
        self._done = True
        if not data:
            raise ForkedPartFailed(f"the forked part ended without a result (wait status {status})")
        kind, *rest = pickle.loads(data)
        if kind != "ok":
            raise ForkedPartFailed(f"{rest[0]}\n{rest[1]}".rstrip())
        return rest[0]

    def stop(self) -> None:
        if self._done:
            return
        self._done = True
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        with contextlib.suppress(OSError):
            os.close(self._read)


class Claims:
    """Pieces of work that a parent and its forked part share: each takes the next piece when it
    is free, and ``take()`` gives every piece to exactly one of them (then None). Made before
    the fork: a pipe holding the pieces' numbers, one byte each, its write end closed, so each
    read of one byte takes the next number and a read after the last gets the end of the pipe
    (a read of one byte from a pipe is atomic). ``close()`` in each process after."""

    def __init__(self, count: int):
        if not 0 <= count <= 256:
            raise ValueError("from 0 to 256 pieces")
        read, write = os.pipe()
        os.write(write, bytes(range(count)))  # within the pipe's buffer (at least 4 KB)
        os.close(write)
        self._read: int | None = read

    def take(self) -> int | None:
        if self._read is None:
            return None
        got = os.read(self._read, 1)
        return got[0] if got else None

    def close(self) -> None:
        if self._read is not None:
            with contextlib.suppress(OSError):
                os.close(self._read)
            self._read = None
