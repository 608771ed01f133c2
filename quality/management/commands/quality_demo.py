from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from core.errors import ServiceError
from projects.models import Membership, Project, Role
from quality.demo import demo_audit, demo_simulate


class Command(BaseCommand):
    help = (
        "Simulate annotation, adjudication and a candidate-blind audit of a demo meme3w project "
        "(run after load_demo), so the quality dashboard has data to show."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", default="demo-meme3w")
        parser.add_argument(
            "--weeks", type=int, default=4, help="Spread the simulated submissions over this many past weeks."
        )
        parser.add_argument("--audit-size", type=int, default=200)
        parser.add_argument("--no-audit", action="store_true")

    def handle(self, *args, project: str, weeks: int, audit_size: int, no_audit: bool, **options):
        p = Project.objects.filter(slug=project).first()
        if p is None:
            raise CommandError(f"No project {project!r}: run `manage.py load_demo` first.")
        if p.preset != "meme3w":
            raise CommandError("The simulation writes meme3w records; choose a meme3w project.")

        def members(role):
            return [
                m.user
                for m in Membership.objects.filter(project=p, role=role).select_related("user").order_by("user_id")
            ]

        annotators, reviewers, leads = members(Role.ANNOTATOR), members(Role.REVIEWER), members(Role.LEAD)
        if len(annotators) < p.annotators_per_item or not reviewers or not leads:
            raise CommandError(f"{p.slug} needs {p.annotators_per_item} annotators, a reviewer and a lead.")
        out = demo_simulate(project=p, annotators=annotators, reviewer=reviewers[0], weeks=weeks)
        self.stdout.write(
            f"{p.slug}: {out['submitted']} annotations on {out['items']} items, {out['adjudicated']} adjudicated"
        )
        if not no_audit:
            try:
                audit = demo_audit(project=p, lead=leads[0], size=audit_size)
            except ServiceError as exc:
                raise CommandError(exc.message) from None
            self.stdout.write(
                f"audit #{audit['audit']}: {audit['submitted']} of {audit['size']} blind annotations submitted"
            )
