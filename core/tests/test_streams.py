"""core.streams: a long read outside a transaction streams over a connection of its own, in a
transaction of its own (no WITH HOLD cursor stored whole first); inside one it stays on the
caller's connection, which alone sees the transaction's rows."""

from __future__ import annotations

import pytest
from django.db import connection, connections, transaction
from django.db.models import F

from core.streams import stream, streaming_connection
from projects.factories import items_create
from projects.models import Item, Project

PG = pytest.mark.skipif(connection.vendor != "postgresql", reason="the streaming connection is PostgreSQL's")


def others_in_a_transaction() -> list[str]:
    """Client backends of this database, other than this one, inside a transaction, named (an
    autovacuum worker of this database has a transaction too, and is not ours). A reader
    closed without a rollback stood here for a moment after its close (core.streams._end)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, state, left(query, 80) FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
        )
        return [" ".join(map(str, row)) for row in cursor.fetchall()]  # named, should one stay


def holdable_cursors(alias: str) -> list[bool]:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT is_holdable FROM pg_cursors")
        return [row[0] for row in cursor.fetchall()]


@pytest.fixture
def make_items(project, tmp_path):
    def make(n: int) -> Project:
        for k, item in enumerate(items_create(project, tmp_path / "src", n)):
            Item.objects.filter(pk=item.pk).update(metadata={"k": k})
        return project

    return make


@PG
@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_rows_stream_over_a_connection_of_their_own(make_items):
    project = make_items(25)
    rows = Item.objects.filter(project=project).order_by("id").values_list("id", "source_id", "metadata")
    assert others_in_a_transaction() == []
    seen, during = [], []
    for row in stream(rows, 4):
        seen.append(row)
        if len(seen) == 5:
            during.append(len(others_in_a_transaction()))
            # the caller's connection stays in autocommit: a write is visible at once elsewhere
            Item.objects.filter(pk=row[0]).update(text=F("text"))
            assert connection.get_autocommit() and not connection.in_atomic_block
    assert during == [1]  # the reader, in its transaction
    assert seen == list(rows.iterator(chunk_size=4))  # the same rows, converters applied (JSON)
    assert seen[0][2] == {"k": 0}
    assert others_in_a_transaction() == []  # rolled back and closed at the end
    assert not [name for name in dir(connections._connections) if "-stream-" in name]


@PG
@pytest.mark.django_db(transaction=True)
def test_the_reading_cursor_is_not_holdable_and_a_broken_read_closes_its_connection(make_items):
    project = make_items(10)
    with streaming_connection() as alias:
        assert alias != "default"
        with connections[alias].chunked_cursor() as cursor:
            cursor.execute("SELECT id FROM projects_item WHERE project_id = %s", [project.pk])
            assert holdable_cursors(alias) == [False]
            assert len(cursor.fetchmany(100)) == 10
    rows = Item.objects.filter(project=project).values_list("id")
    with pytest.raises(RuntimeError, match="the writer failed"), streaming_connection() as alias:
        connections[alias].cursor().execute("SELECT 1")
        raise RuntimeError("the writer failed")
    assert others_in_a_transaction() == []
    gen = stream(rows, 3)
    next(gen)
    assert len(others_in_a_transaction()) == 1
    gen.close()  # a consumer that stops early
    assert others_in_a_transaction() == []

    def consumer():
        for _ in stream(rows, 3):
            raise ValueError("a writer failed mid-read")

    with pytest.raises(ValueError) as failed:
        consumer()
    assert failed.value.__traceback__ is not None  # the traceback is kept, the read is not
    assert others_in_a_transaction() == []


@pytest.mark.django_db
def test_inside_a_transaction_the_read_stays_on_the_callers_connection(make_items):
    project = make_items(7)  # uncommitted: the test's transaction
    rows = Item.objects.filter(project=project).order_by("id").values_list("source_id", flat=True)
    with transaction.atomic():
        with streaming_connection() as alias:
            assert alias == "default"
        assert list(stream(rows, 2)) == list(rows) and len(list(rows)) == 7
