"""Long reads that stream: the rows of a big query while PostgreSQL still produces them.

Outside a transaction (a job's autocommit connection) Django declares its server-side cursors
``WITH HOLD``, since each statement commits and the cursor must outlive it; PostgreSQL then
runs the whole query and stores its result when the DECLARE commits, before the first row is
fetched. At 1M released records the first row of a release's records came after ~5-6 s, the
store cost PostgreSQL ~1-2 s of CPU more than the query (a temporary file of the whole result),
and the reading process sat idle meanwhile (bench/scale.py).

``streaming_connection`` gives such a read a connection of its own in a transaction of its
own, where the cursor is not holdable: PostgreSQL sends each chunk as it reaches it. The
caller's connection stays in autocommit for what it writes meanwhile (a job's progress and
heartbeat, visible at once). Inside a transaction, or on another database, the read stays on
the caller's connection: Django's cursor streams there already, and only that connection sees
the transaction's rows.

The reading transaction only reads (READ COMMITTED: the query's snapshot, as before); it is
rolled back, then its connection closed, when the read ends, however it ends.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

_names = itertools.count(1)


@contextmanager
def streaming_connection(alias: str = DEFAULT_DB_ALIAS) -> Iterator[str]:
    """The alias to read a long result of database ``alias`` from (see the module)."""
    own = connections[alias]
    if own.vendor != "postgresql" or not own.get_autocommit():
        yield alias
        return
    name = f"{alias}-stream-{next(_names)}"
    reader = connections.create_connection(alias)
    connections[name] = reader  # this thread's, for queryset.using(name); removed below
    try:
        reader.set_autocommit(False)  # connects; its named cursors are then not WITH HOLD
        yield name
    finally:
        try:
            _end(reader)
        finally:
            del connections[name]


def _end(reader) -> None:
    """Roll the reading transaction back, then close. The rollback is what ends it at once: a
    closed socket alone ends the server's backend (and its transaction) only when that backend
    next notices, and meanwhile it still stands "idle in transaction" (seen in CI). A connection
    that broke mid-read cannot roll back; closing it is all there is to do."""
    try:
        if reader.connection is not None:
            reader.rollback()
    except DatabaseError:
        pass
    finally:
        reader.close()


def stream(queryset, chunk_size: int) -> Iterator:
    """``queryset.iterator(chunk_size=chunk_size)``, read over ``streaming_connection``: the
    same rows (the ORM's own iterator and converters, on the other connection). Iterate it in
    the ``for`` statement itself, not through a name: an error in the loop's body then closes
    it, and its connection, as the exception leaves the loop (core/tests/test_streams.py)."""
    with streaming_connection(queryset.db) as alias:
        yield from queryset.using(alias).iterator(chunk_size=chunk_size)
