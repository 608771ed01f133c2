from __future__ import annotations

import pytest

from studies.factories import references_write, staged_project

#: 12 items: English x ACG 5, English x Daily life 3, Chinese x ACG 3, Chinese x Public life 1.
STRATA = (
    [("English", "ACG")] * 5 + [("English", "Daily life")] * 3 + [("Chinese", "ACG")] * 3 + [("Chinese", "Public life")]
)


@pytest.fixture
def people(make_user):
    names = ("writer1", "writer2", "part1", "part2", "part3", "judge1", "judge2", "adjudicator", "summarist")
    return {n: make_user(n) for n in names}


@pytest.fixture
def study_project(lead, people, tmp_path):
    annotators = [people[n] for n in ("writer1", "writer2", "part1", "part2", "part3", "judge1", "summarist")]
    project = staged_project(
        "st", lead=[lead], annotator=annotators, reviewer=[people["judge2"], people["adjudicator"]]
    )
    items, writers = references_write(project, [people["writer1"], people["writer2"]], tmp_path / "src", STRATA)
    return project, items, writers
