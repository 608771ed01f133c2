from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from annotation.models import Annotation
from candidates.demo import demo_candidates_load
from candidates.services import items_start_annotation
from evaluation.demo import demo_leaderboard, demo_vikr_evaluation_load
from exports.services import export_job_run, export_job_start, near_duplicates_detect
from projects.demo import DEMO_PASSWORD_SUFFIX, DEMO_USERS, write_demo_source
from projects.imports import import_job_create, import_job_run
from projects.models import Project
from projects.services import membership_add, project_create
from quality.demo import demo_audit, demo_simulate
from workflow.demo import demo_vikr_load, demo_vikr_write

SIMULATED = "demo-meme3w-simulated"

DEMO_PROJECTS = [
    ("demo-meme3w", "Demo: Meme3W", "meme3w", None),
    ("demo-aha", "Demo: AHA-Memes", "aha", 12),
    # Same memes, already worked through by a simulated team (annotation, adjudication, blind
    # audit, release v1), so dashboards and the REST API have something to show at once.
    (SIMULATED, "Demo: Meme3W, simulated team", "meme3w", None),
    # MemeBench's construction (explanations -> LLM checklists -> QC), half Chinese, a replay converter.
    ("demo-vikr", "Demo: MemeBench VIKR", "vikr", 8),
]
#: Roles a demo user has in one project on top of DEMO_USERS'. MemeBench's independence study
#: needs six people per item (the reference's writer, its QC reviewer, two blind re-explainers,
#: a judge, an independent adjudicator): in demo-vikr the auditor also reviews, and judges.
EXTRA_ROLES = {"demo-vikr": {"auditor": ["reviewer"]}}


class Command(BaseCommand):
    help = "Create the demo projects, images and users (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--quiet", action="store_true")

    def handle(self, *args, quiet=False, **options):
        User = get_user_model()
        users = {}
        for username in DEMO_USERS:
            user, created = User.objects.get_or_create(username=username)
            if created:
                user.set_password(username + DEMO_PASSWORD_SUFFIX)
                user.save()
            users[username] = user
        admin, created = User.objects.get_or_create(username="admin", defaults={"is_staff": True, "is_superuser": True})
        if created:
            admin.set_password("admin" + DEMO_PASSWORD_SUFFIX)
            admin.save()
        for slug, name, preset, limit in DEMO_PROJECTS:
            project = Project.objects.filter(slug=slug).first() or project_create(
                name=name, slug=slug, preset=preset, lead=users["lead"]
            )
            for username, roles in DEMO_USERS.items():
                for role in [*roles, *EXTRA_ROLES.get(slug, {}).get(username, [])]:
                    membership_add(project=project, user=users[username], role=role)
            source = settings.VAR_DIR / "demo_source" / slug
            write_demo_source(source, limit=limit)
            if preset == "vikr":
                demo_vikr_write(source)
                demo_vikr_load(project=project)
            job = import_job_run(
                job=import_job_create(project=project, user=users["lead"], source_name="demo"), path=source
            )
            if preset == "vikr":  # stage 1 has no candidates: its items go straight to annotation
                items_start_annotation(project=project)
                # Nothing is annotated, converted or released: the lead runs the pipeline. The two
                # demo models' explanation files and the two replay judges wait for the release.
                models = demo_vikr_evaluation_load(
                    project=project, folder=settings.VAR_DIR / "demo_source" / f"{slug}-models"
                )
            else:
                demo_candidates_load(project=project, lead=users["lead"])  # replay "model-1/2/3": offline
            near_duplicates_detect(project=project)  # near-duplicate pairs for the review queue
            if slug == SIMULATED:
                self._simulate(project, users, quiet=quiet)
            if not quiet:
                self.stdout.write(f"{name}: {project.items.count()} items ({job.imported} new, {job.refused} refused)")
                if preset == "vikr":
                    self.stdout.write(
                        "  after its first release, submit the demo models' explanations on the leaderboard and "
                        "judge them with Judge A/B (replay): " + ", ".join(str(p) for p in models.values())
                    )
        if not quiet:
            self.stdout.write("Demo logins (username / password):")
            for username in [*DEMO_USERS, "admin"]:
                self.stdout.write(f"  {username:<11} {username}{DEMO_PASSWORD_SUFFIX}")

    def _simulate(self, project, users, *, quiet):
        """Simulated annotation, adjudication, audit and release v1 (once per install)."""
        if Annotation.objects.filter(item__project=project).exists():
            return
        annotators = [users["annotator1"], users["annotator2"]]
        demo_simulate(project=project, annotators=annotators, reviewer=users["reviewer"])
        demo_audit(project=project, lead=users["lead"], size=200)
        release = export_job_run(job=export_job_start(project=project, user=users["lead"], enqueue=False))
        if release is not None:
            folder = settings.VAR_DIR / "demo_source" / f"{project.slug}-predictions"
            demo_leaderboard(release=release, user=users["researcher"], folder=folder)
        if not quiet and release is not None:
            self.stdout.write(f"{project.name}: simulated annotation and audit, release v{release.number} published")
