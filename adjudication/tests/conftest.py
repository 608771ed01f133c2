from __future__ import annotations

import pytest

from annotation.factories import MEME3W_HARMFUL, claim, items_open, ready
from workflow.services import annotation_submit


@pytest.fixture
def submit():
    """submit(user, project, values) -> SaveResult: claim the next item and submit ``values``."""

    def _submit(user, project, values):
        ready(user, project)
        annotation = claim(user, project)
        return annotation_submit(annotator=user, item=annotation.item, values=values, version=annotation.version)

    return _submit


@pytest.fixture
def one_item(project, tmp_path):
    from projects.factories import items_create

    items = items_create(project, tmp_path / "one", 1, texts=["When the people from Planet Zorg ask for wifi"])
    items_open(items)
    return items[0]


HARMFUL = MEME3W_HARMFUL
