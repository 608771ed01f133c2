"""The vikr demo (workflow.demo): its memes import, the replay converter converts every demo
explanation offline, and the two planted problems are flagged for QC."""

from __future__ import annotations

import json

import pytest

from annotation.factories import claim, ready
from candidates.models import Conversion
from candidates.services import items_start_annotation
from core.models import JobStatus
from projects.demo import cjk_font_file, write_demo_source
from projects.factories import project_with_members
from projects.imports import import_job_create, import_job_run
from workflow.demo import DEMO_VIKR, demo_vikr_load, demo_vikr_write
from workflow.services import annotation_submit

pytestmark = pytest.mark.django_db


def test_demo_memes_convert_offline_with_flags(lead, make_user, tmp_path, django_capture_on_commit_callbacks) -> None:
    writer = make_user("annotator1")
    project = project_with_members("demo-vikr", preset="vikr", lead=[lead], annotator=[writer])
    ready(writer, project)
    source, english = tmp_path / "src", tmp_path / "en"
    write_demo_source(source, limit=8)
    write_demo_source(english, limit=8)
    demo_vikr_write(source)
    rows = {r["source_id"]: r for r in map(json.loads, (source / "manifest.jsonl").read_text("utf-8").splitlines())}
    assert {sid: r["language"] for sid, r in rows.items()} == {
        sid: "zh" if "\u4e00" <= text[0] <= "\u9fff" else "en" for sid, (text, _) in DEMO_VIKR.items()
    }
    if cjk_font_file():  # the Chinese memes are drawn again with their Chinese caption
        for sid, r in rows.items():
            redrawn = (source / r["image"]).read_bytes() != (english / r["image"]).read_bytes()
            assert redrawn == (r["language"] == "zh"), sid
    demo_vikr_load(project=project)
    job = import_job_run(job=import_job_create(project=project, user=lead, source_name="demo"), path=source)
    assert job.imported == len(DEMO_VIKR)
    items_start_annotation(project=project)
    assert sum(any("\u4e00" <= ch <= "\u9fff" for ch in text) for text, _ in DEMO_VIKR.values()) == 4
    for _ in DEMO_VIKR:
        mine = claim(writer, project)
        with django_capture_on_commit_callbacks(execute=True):
            annotation_submit(
                annotator=writer,
                item=mine.item,
                values={
                    "explanation": f"Explanation of {mine.item.source_id}",
                    "language": "English",
                    "domain": "Daily life",
                },
                version=mine.version,
            )
    rows = {c.item.source_id: c for c in Conversion.objects.select_related("item")}
    assert all(c.status == JobStatus.DONE for c in rows.values()), {k: c.error for k, c in rows.items()}
    assert [f["check"] for f in rows["demo-02"].flags] == ["entity_in_visual"]
    assert [f["check"] for f in rows["demo-03"].flags] == ["link"]
    flagged = sorted(k for k, c in rows.items() if c.flags)
    # demo-01 and demo-04 transcribe a caption that names the entity: flagged too, the QC
    # reviewer decides (an OCR transcription may legitimately hold a name).
    assert flagged == ["demo-01", "demo-02", "demo-03", "demo-04"], {k: rows[k].flags for k in flagged}
