"""Fixtures of the security tests: the own project and a foreign one, built through the services."""

from __future__ import annotations

import pytest

from .world import World, build_world


@pytest.fixture
def world(db, tmp_path) -> World:
    return build_world("p1", tmp_path / "own")


@pytest.fixture
def foreign(db, tmp_path, world) -> World:
    return build_world("other", tmp_path / "foreign", prefix="f_")
