"""Run one import job the way the worker does, in a process of its own, and report as JSON.

Used by tests/security/test_hostile_uploads.py::

    python tests/security/import_runner.py <upload path>

with DATABASE_URL pointing at a migrated scratch database, CONCORD_VAR_DIR at a scratch
folder and, optionally, IMPORT_RUNNER_ADDRESS_SPACE_MB capping the process's address space.
Prints one JSON object: the job's outcome, the items created, and the process's peak resident
set size (VmHWM) before and after the import, so a bomb that inflates in memory shows up even
when the job "succeeds".
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path


def peak_mb() -> float:
    """Peak resident set size of this process so far.

    VmHWM, not ``ru_maxrss``: Linux carries the high-water mark of the image replaced by
    ``exec`` into ``ru_maxrss``, i.e. the size of the forking pytest process (~500 MB late in a
    full run), whereas VmHWM belongs to this process's own memory.
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux, elsewhere an upper bound


def main(upload: str) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "concord.settings")
    import django

    django.setup()
    from django.conf import settings

    from projects.imports import import_job_create
    from projects.models import ImportJob, Item
    from projects.services import project_create
    from projects.tasks import import_job_task

    project = project_create(name="Hostile", slug="hostile", preset="meme3w")
    job = import_job_create(project=project, user=None, source_name=Path(upload).name, upload_path=upload)
    baseline = peak_mb()
    crashed = None
    try:
        import_job_task(job.pk)  # what the Celery worker runs (eager: near-duplicate scan inline)
    except BaseException as exc:
        crashed = f"{type(exc).__name__}: {exc}"[:500]
    job = ImportJob.objects.get(pk=job.pk)
    media = Path(settings.MEDIA_ROOT)
    return {
        "status": job.status,
        "message": job.error,
        "imported": job.imported,
        "errors": job.errors[:50],
        "error_count": job.refused,
        "stored_problems": len(job.errors),
        "crashed": crashed,
        "items": list(Item.objects.filter(project=project).values_list("source_id", flat=True)),
        "stored_files": sorted(str(p.relative_to(media)) for p in media.rglob("*") if p.is_file()),
        "baseline_mb": round(baseline, 1),
        "peak_mb": round(peak_mb(), 1),
    }


if __name__ == "__main__":
    cap = int(os.environ.get("IMPORT_RUNNER_ADDRESS_SPACE_MB", "0"))
    if cap:  # set before Django and NumPy load, so everything this process maps counts
        resource.setrlimit(resource.RLIMIT_AS, (cap * 1024 * 1024, cap * 1024 * 1024))
    print(json.dumps(main(sys.argv[1])))
