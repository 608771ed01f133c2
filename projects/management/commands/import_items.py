from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from projects.imports import import_job_create, import_job_run
from projects.models import Project


class Command(BaseCommand):
    help = "Import items into a project from a folder or zip holding images and a JSONL/CSV manifest."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("path", help="folder or .zip")

    def handle(self, *args, project, path, **options):
        proj = Project.objects.filter(slug=project).first()
        if proj is None:
            raise CommandError(f"no project with slug {project!r}")
        job = import_job_run(job=import_job_create(project=proj, user=None, source_name=path), path=path)
        if job.status == job.Status.FAILED:
            raise CommandError(job.error)
        self.stdout.write(
            f"{job.progress_total} rows: imported {job.imported} (exact pixel duplicates flagged: {job.exact_duplicates}), "
            f"already present {job.already_present}, refused {job.refused}"
        )
        for e in job.errors:
            self.stdout.write(
                f"  row {e['row']}" + (f" ({e['source_id']})" if e.get("source_id") else "") + f": {e['reason']}"
            )
        if job.refused > len(job.errors):
            self.stdout.write(f"  ... and {job.refused - len(job.errors)} more; by reason: {job.error_counts}")
