"""Claims under real concurrency: threads with their own PostgreSQL connections.

SQLite serializes writers (IMMEDIATE transactions), so there is nothing to race there; these
tests need PostgreSQL's row locks and SKIP LOCKED, and run in CI, which uses PostgreSQL.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection, connections

from annotation.factories import MEME3W_HARMFUL, items_open, ready
from annotation.models import Annotation, Assignment
from annotation.services import assignment_claim_next
from conftest import require
from projects.services import membership_add
from workflow.services import annotation_submit

pytestmark = pytest.mark.django_db(transaction=True)


def run_threads(target, args_list):
    barrier = threading.Barrier(len(args_list))
    errors = []

    def wrap(*args):
        try:
            barrier.wait(timeout=10)
            target(*args)
        except Exception as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=wrap, args=a) for a in args_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []


@pytest.fixture
def crowd(project, make_user):
    require(connection.vendor == "postgresql", "concurrency tests need PostgreSQL (set DATABASE_URL)")
    users = [make_user(f"crowd{i}") for i in range(12)]
    for u in users:
        membership_add(project=project, user=u, role="annotator")
        ready(u, project)
    return users


def test_concurrent_claims_never_exceed_n_per_item(project, items, crowd):
    items_open(items[:3])  # 3 items x N=2 = 6 slots for 12 annotators claiming at once
    results = {}

    def grab(user):
        results[user.pk] = assignment_claim_next(annotator=user, project=project)

    run_threads(grab, [(u,) for u in crowd])
    per_item = Counter(Assignment.objects.filter(kind="annotation").values_list("item_id", flat=True))
    assert per_item == {i.pk: 2 for i in items[:3]}
    claimed = [r for r in results.values() if r.outcome == "claimed"]
    assert len(claimed) == 6 and sum(r.outcome == "empty" for r in results.values()) == 6
    # Distinct annotators per item.
    pairs = Annotation.objects.values_list("item_id", "annotator_id")
    assert len(set(pairs)) == len(pairs) == 6


def test_concurrent_rounds_of_claim_and_submit(project, items, crowd):
    items_open(items)
    rounds = 3

    def work(user):
        for _ in range(rounds):
            result = assignment_claim_next(annotator=user, project=project)
            if result.annotation is None:
                return
            annotation_submit(annotator=user, item=result.annotation.item, values=MEME3W_HARMFUL, version=0)

    run_threads(work, [(u,) for u in crowd])
    submitted = Counter(Annotation.objects.filter(status="submitted").values_list("item_id", flat=True))
    # Every item was completed by exactly N distinct annotators and then routed (identical => gold).
    assert submitted == {i.pk: 2 for i in items}
    assert not Assignment.objects.exists()
    from projects.models import Item

    assert set(Item.objects.filter(pk__in=[i.pk for i in items]).values_list("stage", flat=True)) == {"gold"}
