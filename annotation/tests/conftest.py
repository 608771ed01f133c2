from __future__ import annotations

import pytest

from annotation.factories import items_open, ready


@pytest.fixture
def open_items(items):
    items_open(items)
    return items


@pytest.fixture
def ann_a(annotator_a, project):
    return ready(annotator_a, project)


@pytest.fixture
def ann_b(annotator_b, project):
    return ready(annotator_b, project)


@pytest.fixture
def ann_c(annotator_c, project):
    from projects.services import membership_add

    membership_add(project=project, user=annotator_c, role="annotator")
    return ready(annotator_c, project)
