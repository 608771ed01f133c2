"""The study goes into the release: independence_study.json listed in the manifest with its
sha256, its figures equal to the report, and a section of the datasheet README."""

from __future__ import annotations

import json

import pytest

from annotation.factories import ready
from annotation.services import assignment_claim_next
from exports.selectors import release_dir
from exports.services import export_job_run, export_job_start
from exports.writers import file_digest
from studies.selectors import study_report
from studies.services import (
    judgement_claim_next,
    judgement_submit,
    reexplanation_claim_next,
    reexplanation_save,
    study_confirm,
    study_draw,
    study_item_remove,
    study_reference_revise,
)
from workflow.services import annotation_submit

pytestmark = pytest.mark.django_db


def _build(project, lead):
    job = export_job_start(project=project, user=lead, enqueue=False)
    release = export_job_run(job=job)
    job.refresh_from_db()
    assert release is not None, job.error
    return release


def test_release_carries_the_study_report_and_a_datasheet_section(study_project, lead, people):
    project, _, _ = study_project
    # Every item through stage 2 so the release has gold records.
    ready(people["summarist"], project)
    while (a := assignment_claim_next(annotator=people["summarist"], project=project).annotation) is not None:
        annotation_submit(annotator=people["summarist"], item=a.item, values={"summary": "s"}, version=a.version)
    # The summarist saw every reference: blocked everywhere; part1/part2 re-explain, judge1 judges.
    study = study_confirm(
        study=study_draw(project=project, lead=lead, sample_size=4, seed=0, strata_fields=["language", "domain"]),
        lead=lead,
    )
    for _ in range(4):
        for p in ("part1", "part2"):
            r = reexplanation_claim_next(study=study, participant=people[p])
            reexplanation_save(reexplanation=r, participant=people[p], text="blind", version=r.version, submit=True)
    while (r := judgement_claim_next(study=study, judge=people["judge1"])) is not None:
        judgement_submit(reexplanation=r, judge=people["judge1"], verdict="fully")
    first, second = list(study.items.order_by("id"))[:2]
    study_reference_revise(study_item=first, lead=lead, text="A better reference")
    study_item_remove(study_item=second, lead=lead, reason="ambiguity")

    release = _build(project, lead)
    folder = release_dir(release)
    path = folder / "independence_study.json"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["files"]["independence_study.json"]["sha256"] == file_digest(path).sha256
    data = json.loads(path.read_text())
    assert data["format"] == "concord-independence-studies" and len(data["studies"]) == 1
    report = data["studies"][0]
    assert report == json.loads(json.dumps(study_report(study=study)))
    assert report["compatible"]["share"] == 1.0 and report["compatible"]["n"] == 4
    assert report["revisions"]["count"] == 1 and report["removals"]["count"] == 1
    readme = (folder / "README.md").read_text()
    assert "## Reference-independence study" in readme
    assert "**100.0% of references fully or partially compatible** (4 of 4 decided" in readme
    assert "Revisions of references it led to: 1; removals: 1 (independence study: ambiguous meme: 1)" in readme
    # the revised reference is what the release's record holds; the removed item is not released
    records = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
    by_id = {r["item_id"]: r for r in records}
    assert second.item_id not in by_id
    assert "A better reference" in json.dumps(by_id[first.item_id], ensure_ascii=False)
    assert manifest["exclusions_by_reason"] == {"independence study: ambiguous meme": 1}


def test_no_study_no_file(study_project, lead, people):
    project, _, _ = study_project
    ready(people["summarist"], project)
    a = assignment_claim_next(annotator=people["summarist"], project=project).annotation
    annotation_submit(annotator=people["summarist"], item=a.item, values={"summary": "s"}, version=a.version)
    study_draw(project=project, lead=lead, sample_size=2, strata_fields=[])  # a draft is not released
    folder = release_dir(_build(project, lead))
    assert not (folder / "independence_study.json").exists()
    assert "Reference-independence study" not in (folder / "README.md").read_text()
