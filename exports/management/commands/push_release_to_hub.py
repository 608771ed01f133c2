"""Push a published release to a Hugging Face Hub dataset repo, in this process.

    HF_TOKEN=hf_... python manage.py push_release_to_hub <project-slug> <number> [--repo owner/name]

The same job as the release page's button (exports.services.hub_push_start / hub_push_run),
run here instead of in a worker; ``--repo`` defaults to the project's release settings.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from core.errors import ServiceError
from exports.models import Release
from exports.services import hub_push_run, hub_push_start


class Command(BaseCommand):
    help = "Push a published release to a Hugging Face Hub dataset repo (token from HF_TOKEN)."

    def add_arguments(self, parser):
        parser.add_argument("project", help="Project slug.")
        parser.add_argument("number", type=int, help="Release number (v<number>).")
        parser.add_argument("--repo", default="", help="Hub dataset repo owner/name (default: release settings).")

    def handle(self, *args, project, number, repo, **options):
        release = Release.objects.filter(project__slug=project, number=number).select_related("project").first()
        if release is None:
            raise CommandError(f"No release v{number} of project {project!r}.")
        try:
            push = hub_push_start(release=release, user=None, repo_id=repo, enqueue=False)
        except ServiceError as exc:
            raise CommandError(str(exc)) from None
        push = hub_push_run(push_id=push.pk)
        if push is None or push.status != "done":
            raise CommandError(f"Push failed: {push.error if push else 'not run'}")
        self.stdout.write(f"Pushed {release} to {push.repo_id}: {push.files} files, {push.commit_url}")
