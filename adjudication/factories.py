"""Adjudication test data, made through the services as reviewers would make it."""

from __future__ import annotations

from adjudication.services import adjudication_next, gold_decide
from projects.fieldtypes import AGREE
from projects.models import Project


def gold_decide_all(project: Project, reviewer, *, pick: int = 1) -> int:
    """The reviewer settles every open task by taking Annotator ``pick``'s value for each
    disputed field. Returns the number of tasks decided."""
    done = 0
    while (task := adjudication_next(project=project, reviewer=reviewer)) is not None:
        decisions = {f: {"pick": pick} for f, outcome in task.comparison.items() if outcome != AGREE}
        gold_decide(task=task, reviewer=reviewer, decisions=decisions, note="", version=task.version)
        done += 1
    return done
