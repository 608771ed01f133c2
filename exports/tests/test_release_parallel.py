"""The release's second half in a forked process (core.forked): the same bytes as one process,
and a failing or dying part fails the build cleanly. Transactional: a forked child reads
committed rows only, and the fork is used only outside a transaction, on PostgreSQL."""

from __future__ import annotations

import os
import time

import pytest
from django.db import connection

import core.forked
import exports.build.release as release_module
from annotation.factories import MEME3W_HARMFUL, MEME3W_NOT_HARMFUL
from candidates.factories import candidates_create
from exports.archive import ARCHIVE_INDEX
from exports.models import ExportJob, Release
from exports.selectors import release_dir
from exports.services import export_job_run, export_job_start
from exports.tests.test_release import build

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the forked part runs on PostgreSQL only"),
]


@pytest.fixture
def forks(monkeypatch):
    """Counts the forked parts started by a build (the class is looked up at call time)."""
    started = []

    class Counting(core.forked.Forked):
        def __init__(self, *args, **kwargs):
            started.append(args[0].__name__)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(release_module, "Forked", Counting)
    return started


def files_of(release: Release) -> dict[str, bytes]:
    root = release_dir(release)
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ARCHIVE_INDEX  # the archive index names the release number
    }


def test_the_forked_build_writes_the_same_bytes_as_one_process(project, dup_gold, lead, settings, forks):
    candidates_create(dup_gold[0], [MEME3W_HARMFUL, MEME3W_NOT_HARMFUL, MEME3W_HARMFUL])
    settings.JOB_PARTS_IN_PARALLEL = True
    forked = build(project, lead)
    assert forks == ["_tables"]
    settings.JOB_PARTS_IN_PARALLEL = False
    single = build(project, lead)
    assert forks == ["_tables"]  # the second build did not fork
    a, b = files_of(forked), files_of(single)
    assert sorted(a) == sorted(b) and "annotations.parquet" in a and "agreement.json" in a
    assert [name for name in a if a[name] != b[name]] == []
    assert forked.manifest_sha256 == single.manifest_sha256
    # The parent's own connection works after the fork (it was closed before it, then reopened).
    assert Release.objects.filter(project=project).count() == 2


@pytest.mark.parametrize("slow", ["records", "annotations"])
def test_the_candidate_parts_go_to_whichever_half_is_free_with_the_same_bytes(
    project, dup_gold, lead, settings, forks, monkeypatch, tmp_path, slow
):
    """The half that is slowed writes no candidate part, the other writes every part once, and
    the merged files are the one-process build's (which writes the candidates in one pass)."""
    import time

    candidates_create(dup_gold[0], [MEME3W_HARMFUL, MEME3W_NOT_HARMFUL, MEME3W_HARMFUL])
    candidates_create(dup_gold[1], [MEME3W_NOT_HARMFUL, MEME3W_HARMFUL])
    settings.JOB_PARTS_IN_PARALLEL = False
    single = build(project, lead)
    writers = tmp_path / "writers"

    def slowed(fn):
        def run(**kwargs):
            time.sleep(1.5)
            return fn(**kwargs)

        return run

    def noted(**kwargs):
        with open(writers, "a") as fh:  # the forked child's lines reach the parent's file
            fh.write(f"{os.getpid()} {kwargs['index']}\n")
        return write_part(**kwargs)

    write_part = release_module._write_candidate_part
    name = "_write_records" if slow == "records" else "_write_annotations"
    monkeypatch.setattr(release_module, name, slowed(getattr(release_module, name)))
    monkeypatch.setattr(release_module, "_write_candidate_part", noted)
    settings.JOB_PARTS_IN_PARALLEL = True
    forked = build(project, lead)
    assert forks == ["_tables"]
    taken = [line.split() for line in writers.read_text().splitlines()]
    assert sorted(int(k) for _, k in taken) == list(range(release_module.CANDIDATE_PARTS)), "each part once"
    assert {pid == str(os.getpid()) for pid, _ in taken} == {slow == "annotations"}
    a, b = files_of(forked), files_of(single)
    assert sorted(a) == sorted(b) and "candidates.parquet" in a
    assert not [name for name in a if "part" in name or "spool" in name]
    assert [name for name in a if a[name] != b[name]] == []
    assert forked.manifest_sha256 == single.manifest_sha256
    assert forked.manifest["counts"]["candidates"] == single.manifest["counts"]["candidates"] > 0


def test_candidate_parts_cover_every_item_once():
    import numpy as np

    from exports.build.annotations import candidate_part_bounds

    class Plan:
        def __init__(self, ids):
            self.released_ids = np.asarray(ids, dtype=np.int64)

    for ids in ([], [5], [3, 9], list(range(10, 1000, 7))):
        bounds = candidate_part_bounds(Plan(ids), parts=8)
        assert len(bounds) == 8
        for item in [*ids, 0, 1, 10**9]:
            inside = [
                k for k, (lo, hi) in enumerate(bounds) if (lo is None or item >= lo) and (hi is None or item < hi)
            ]
            assert len(inside) == 1, (ids, item, bounds)
        if len(ids) >= 8:
            sizes = [sum((lo is None or i >= lo) and (hi is None or i < hi) for i in ids) for lo, hi in bounds]
            assert max(sizes) - min(sizes) <= 1


def test_the_merge_refuses_a_set_of_parts_that_misses_one(project, tmp_path):
    from collections import Counter

    from exports.build.annotations import CANDIDATE_PARTS, CandidatePart, _merge_candidates

    parts = [
        CandidatePart(index=k, folder=tmp_path, lines={}, models=Counter(), spool=None)
        for k in range(CANDIDATE_PARTS)
        if k != 3
    ]
    with pytest.raises(RuntimeError, match="candidate parts"):
        _merge_candidates(project=project, dest=tmp_path, parts=parts)
    assert not (tmp_path / "candidates").exists()  # nothing written before the check


def failed_build(project, lead) -> ExportJob:
    """A build that must fail: its job, failed, and no release published."""
    job = export_job_start(project=project, user=lead, enqueue=False)
    assert export_job_run(job=job) is None
    job.refresh_from_db()
    assert job.status == ExportJob.Status.FAILED
    assert not Release.objects.filter(project=project).exists()
    return job


def test_a_part_that_fails_or_dies_fails_the_build_and_publishes_nothing(
    project, dup_gold, lead, settings, forks, monkeypatch
):
    settings.JOB_PARTS_IN_PARALLEL = True

    def broken(**kwargs):
        raise ValueError("agreement figures exploded")

    monkeypatch.setattr(release_module, "release_agreement", broken)
    job = failed_build(project, lead)
    assert "agreement figures exploded" in job.error and "ValueError" in job.error
    assert forks == ["_tables"]

    def dies(**kwargs):
        os._exit(3)  # a killed or crashed child: no result at all

    monkeypatch.setattr(release_module, "release_agreement", dies)
    assert "without a result" in failed_build(project, lead).error
    # With the part mended, the next build succeeds.
    monkeypatch.undo()
    settings.JOB_PARTS_IN_PARALLEL = True
    assert build(project, lead).number == 1


def backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'"
        )
        return cursor.fetchone()[0]


def backends_settle_at(count: int) -> bool:
    """Whether the client backends come back to ``count`` within 5 s: a backend whose client
    closed its socket exits when it notices, a moment later (measured: 35 of 300 closes still
    showed their backend right after the close), so a closed connection is awaited, briefly."""
    deadline = time.monotonic() + 5
    while backends() != count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_the_inputs_are_read_in_a_thread_over_its_own_connection_which_it_closes(project, dup_gold, lead, settings):
    import threading

    from exports.build import ReleaseInputs
    from exports.selectors import annotator_pseudonyms, release_card_settings

    settings.JOB_PARTS_IN_PARALLEL = True
    before = backends()
    inputs = ReleaseInputs(project)
    assert inputs._thread is not None and inputs._thread.name == "release-inputs"
    card, pseudonyms = inputs.get()
    assert not inputs._thread.is_alive()
    assert (card, pseudonyms) == (release_card_settings(project=project), annotator_pseudonyms(project=project))
    assert pseudonyms and all(isinstance(v, str) for v in pseudonyms.values())
    assert backends_settle_at(before), "the thread's connection was closed"
    assert not [t for t in threading.enumerate() if t.name == "release-inputs"]
    settings.JOB_PARTS_IN_PARALLEL = False
    assert ReleaseInputs(project)._thread is None  # read when asked, in this thread


def test_a_failure_reading_the_inputs_fails_the_build_with_its_message(project, dup_gold, lead, settings, monkeypatch):
    settings.JOB_PARTS_IN_PARALLEL = True

    def broken(**kwargs):
        raise RuntimeError("pseudonyms unreadable")

    monkeypatch.setattr(release_module, "annotator_pseudonyms", broken)
    assert "pseudonyms unreadable" in failed_build(project, lead).error
    monkeypatch.undo()
    assert build(project, lead).number == 1
