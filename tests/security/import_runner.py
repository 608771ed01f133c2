"""Run one import job the way the worker does, in a process of its own, and report as JSON.

Used by tests/security/test_hostile_uploads.py::

    python tests/security/import_runner.py <upload path>

with DATABASE_URL pointing at a migrated scratch database and CONCORD_VAR_DIR at a scratch
folder. Prints one JSON object: the job's outcome, the items created, and the process's peak
resident set size (``ru_maxrss``) before and after the import, so a bomb that inflates in
memory shows up even when the job "succeeds".
"""
from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main(upload: str) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "concord.settings")
    import django

    django.setup()
    from django.conf import settings

    from projects.models import ImportJob, Item
    from projects.services import project_create
    from projects.tasks import import_job_task

    try:  # the import is moving to its own module with the job mechanism (core.jobs)
        from projects.imports import import_job_create
    except ImportError:
        from projects.services import import_job_create

    project = project_create(name="Hostile", slug="hostile", preset="meme3w")
    job = import_job_create(project=project, user=None, source_name=Path(upload).name, upload_path=upload)
    baseline = peak_mb()
    crashed = None
    try:
        import_job_task(job.pk)  # what the Celery worker runs (eager: near-duplicate scan inline)
    except BaseException as exc:  # noqa: BLE001 - the report says what escaped the job
        crashed = f"{type(exc).__name__}: {exc}"[:500]
    job = ImportJob.objects.get(pk=job.pk)
    media = Path(settings.MEDIA_ROOT)
    return {
        # "message" is called "error" on the unified job model (core.jobs); read either.
        "status": job.status, "message": getattr(job, "message", None) or getattr(job, "error", ""),
        "imported": job.imported,
        "errors": job.errors[:50], "error_count": len(job.errors), "crashed": crashed,
        "items": list(Item.objects.filter(project=project).values_list("source_id", flat=True)),
        "stored_files": sorted(str(p.relative_to(media)) for p in media.rglob("*") if p.is_file()),
        "baseline_mb": round(baseline, 1), "peak_mb": round(peak_mb(), 1),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
