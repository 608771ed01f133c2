"""Score a predictions file for a release split and enter it on the leaderboard.

    manage.py evaluate_submit <project slug> <release number> predictions.jsonl --model "My model" [--split test]
        [--format jsonl|replies] [--description ...] [--url ...] [--user name]

The same service as the page and the REST endpoint (evaluation.services.submission_create).
"""

from __future__ import annotations

import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from core.errors import ServiceError
from evaluation.selectors import release_get_for_evaluation
from evaluation.services import FORMATS, submission_create
from projects.models import Project


class Command(BaseCommand):
    help = "Score a predictions JSONL file (or raw model replies) against a release split."

    def add_arguments(self, parser):
        parser.add_argument("project")
        parser.add_argument("release", type=int)
        parser.add_argument("predictions", type=Path)
        parser.add_argument("--model", required=True, help="Model name on the leaderboard")
        parser.add_argument("--split", default="test")
        parser.add_argument("--format", default="jsonl", choices=FORMATS)
        parser.add_argument("--description", default="")
        parser.add_argument("--url", default="")
        parser.add_argument("--user", default="", help="Recorded as the submitter (optional)")

    def handle(self, *args, **opts):
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"no project {opts['project']!r}")
        try:
            release = release_get_for_evaluation(project=project, number=opts["release"])
        except Http404 as exc:
            raise CommandError(str(exc)) from None
        user = None
        if opts["user"]:
            user = get_user_model().objects.filter(username=opts["user"]).first()
            if user is None:
                raise CommandError(f"no user {opts['user']!r}")
        path: Path = opts["predictions"]
        if not path.is_file():
            raise CommandError(f"no file {path}")
        try:
            with open(path, "rb") as fh:
                fh.size = path.stat().st_size  # type: ignore[attr-defined]
                submission = submission_create(
                    user=user,
                    release=release,
                    split=opts["split"],
                    model_name=opts["model"],
                    description=opts["description"],
                    url=opts["url"],
                    file=fh,
                    fmt=opts["format"],
                )
        except ServiceError as exc:
            raise CommandError(f"{exc.message} {json.dumps(exc.errors)}") from None
        counts = submission.report["counts"]
        self.stdout.write(
            f"submission {submission.pk}: {counts['matched']} predicted, {counts['missing']} missing, "
            f"{counts['extra']} extra, {counts['duplicate']} duplicate"
        )
        for name, fig in submission.scores["figures"].items():
            value = "—" if fig["value"] is None else f"{100 * fig['value']:.2f}"
            ci = fig["ci"]
            interval = f" [{100 * ci[0]:.2f}, {100 * ci[1]:.2f}]" if ci else ""
            self.stdout.write(f"{name:32s} {value:>8s}{interval}  n={fig['n']}")
