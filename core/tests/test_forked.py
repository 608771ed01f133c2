"""core.forked: a part of a job in a forked child, with its own database connection."""

from __future__ import annotations

import os
import time

import pytest
from django.db import connection, connections

from core.forked import Claims, Forked, ForkedPartFailed, fork_possible

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="parts are forked on PostgreSQL only"),
]


def backend_and_process():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0], os.getpid()


def test_the_child_talks_over_its_own_connection_even_one_the_parent_could_not_close(monkeypatch):
    assert fork_possible()
    parent_backend, _ = backend_and_process()
    monkeypatch.setattr(connections, "close_all", lambda: None)  # a connection left open at the fork
    child_backend, child_pid = Forked(backend_and_process).result()
    assert child_pid != os.getpid() and child_backend != parent_backend
    assert backend_and_process() == (parent_backend, os.getpid())  # the parent's own still works
    for _ in range(3):  # and again: nothing the children did reached it
        assert Forked(backend_and_process).result()[0] != parent_backend
    assert backend_and_process()[0] == parent_backend


def test_an_error_a_death_and_a_stop_are_reported_and_the_wait_is_heard():
    with pytest.raises(ForkedPartFailed, match="ZeroDivisionError: division by zero"):
        Forked(lambda: 1 / 0).result()
    with pytest.raises(ForkedPartFailed, match="without a result"):
        Forked(os._exit, 3).result()
    heard = []
    assert Forked(time.sleep, 0.35).result(waiting=lambda: heard.append(1), every=0.05) is None
    assert heard, "waiting() was called while the part ran"
    part = Forked(time.sleep, 60)
    part.stop()
    with pytest.raises(ChildProcessError):
        os.waitpid(part.pid, os.WNOHANG)  # killed and reaped
    assert backend_and_process()[1] == os.getpid()


def test_no_fork_inside_a_transaction(transactional_db):
    from django.db import transaction

    with transaction.atomic():
        assert not fork_possible()
    assert fork_possible()


def test_claims_give_each_piece_to_exactly_one_of_the_parent_and_its_part():
    def take_some(claims, n):
        return [claims.take() for _ in range(n)]

    claims = Claims(5)
    assert claims.take() == 0
    assert Forked(take_some, claims, 2).result() == [1, 2]
    assert take_some(claims, 4) == [3, 4, None, None]  # and never again
    assert Forked(claims.take).result() is None
    claims.close()
    assert claims.take() is None
    assert Claims(0).take() is None
    with pytest.raises(ValueError):
        Claims(257)
