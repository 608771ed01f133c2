"""Annotation test data, made through the services as annotators would make it."""

from __future__ import annotations

from annotation.services import assignment_claim_next, content_warning_accept
from projects.models import Stage
from projects.services import item_stage_set

MEME3W_HARMFUL = {
    "label": "harmful",
    "target_category": "group background",
    "target_entity": "people from Planet Zorg",
    "text_mention": "people from Planet Zorg",
    "visual_region": [[100, 120, 400, 500]],
}
MEME3W_NOT_HARMFUL = {
    "label": "non-harmful",
    "target_category": None,
    "target_entity": None,
    "text_mention": None,
    "visual_region": [],
}


def items_open(items) -> None:
    """Move items to the annotating stage (the candidates app or the lead does this in real use)."""
    for item in items:
        item_stage_set(item=item, stage=Stage.ANNOTATING)


def ready(user, project):
    """An annotator who has read the content warning."""
    content_warning_accept(user=user, project=project)
    return user


def claim(user, project):
    result = assignment_claim_next(annotator=user, project=project)
    assert result.annotation is not None, result.outcome
    return result.annotation
