from __future__ import annotations

import io
import json

import pytest

from exports.factories import gold_create
from exports.selectors import release_dir
from exports.services import export_job_run, export_job_start
from projects.factories import items_create


@pytest.fixture
def release(project, lead, annotator_a, annotator_b, tmp_path):
    """A published meme3w release of 20 gold items (every other one harmful)."""
    texts = [f"Meme {i}: people from Planet Zorg again" if i % 2 else f"Meme {i}: a cat on a sofa" for i in range(20)]
    items = items_create(project, tmp_path / "src", 20, texts=texts)
    gold_create(project, items, [annotator_a, annotator_b])
    return export_job_run(job=export_job_start(project=project, user=lead, enqueue=False))


def records(release, split=None) -> list[dict]:
    with open(release_dir(release) / "records.jsonl", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    return [r for r in rows if split is None or r["split"] == split]


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def upload(data: bytes, name: str = "preds.jsonl"):
    f = io.BytesIO(data)
    f.name = name
    return f


@pytest.fixture
def vikr_preset(monkeypatch):
    """Registers the one-stage VIKR test preset for the test (evaluation.tests.vikr)."""
    from evaluation.tests.vikr import TEST_PRESET, test_preset
    from projects.presets import PRESETS

    monkeypatch.setitem(PRESETS, TEST_PRESET, test_preset())
    return TEST_PRESET


@pytest.fixture
def vikr_project(vikr_preset, lead, annotator_a, annotator_b, researcher, reviewer):
    from evaluation.tests.vikr import vikr_project as make

    return make(
        slug="vk",
        lead=lead,
        annotators=[annotator_a, annotator_b],
        researchers=[researcher],
        others={"reviewer": [reviewer]},
    )


@pytest.fixture
def vikr_release(vikr_project, lead, annotator_a, annotator_b, tmp_path):
    """A published VIKR release of 12 gold items (one-stage test preset)."""
    from evaluation.tests.vikr import vikr_release as make

    return make(project=vikr_project, lead=lead, annotators=[annotator_a, annotator_b], folder=tmp_path / "vsrc")
