"""Fixtures of the quality tests: a meme3w project with six items annotated by two annotators
(through the services), adjudicated by the reviewer, and the values used, so tests can recompute
every figure with metrics/ directly."""

from __future__ import annotations

import pytest

from adjudication.factories import gold_decide_all
from quality.factories import annotate_items

ZORG = "people from Planet Zorg"


def rec(label="harmful", cat="group background", entity=ZORG, mention=ZORG, region=None):
    if label != "harmful":
        return {
            "label": "non-harmful",
            "target_category": None,
            "target_entity": None,
            "text_mention": None,
            "visual_region": [],
        }
    return {
        "label": "harmful",
        "target_category": cat,
        "target_entity": entity,
        "text_mention": mention,
        "visual_region": region if region is not None else [],
    }


# (annotator A, annotator B) per item; item texts are "Meme number i: people from Planet Zorg again".
PAIRS = [
    (rec(region=[[100, 100, 400, 400]]), rec(region=[[100, 100, 400, 400]])),  # identical
    (
        rec(cat="gender", entity="Zorg women", mention="Zorg", region=[[0, 0, 500, 500]]),
        rec(cat="gender", entity="women of Zorg", mention="Planet Zorg", region=[[0, 0, 500, 400]]),
    ),  # minor
    (rec(cat="religion and caste", region=[[10, 10, 200, 200]]), rec(cat="group background", region=[])),
    (rec(), rec("non-harmful")),  # label differs
    (rec("non-harmful"), rec("non-harmful")),  # identical
    (
        rec(cat="health condition", entity="Zorgians", mention=None, region=[[50, 50, 300, 300]]),
        rec(cat="health condition", entity="Zorgians", mention=None, region=[[60, 60, 300, 300]]),
    ),
]


@pytest.fixture
def six_items(project, tmp_path):
    from projects.factories import items_create

    return items_create(project, tmp_path / "six", 6)


@pytest.fixture
def annotated(project, six_items, annotator_a, annotator_b):
    index = {item.pk: i for i, item in enumerate(six_items)}
    annotate_items(project, six_items, [annotator_a, annotator_b], lambda item, k: PAIRS[index[item.pk]][k])
    return six_items


@pytest.fixture
def gold_project(project, annotated, reviewer):
    gold_decide_all(project, reviewer, pick=1)
    return project
