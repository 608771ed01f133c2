from django.apps import AppConfig


class ExportsConfig(AppConfig):
    name = "exports"

    def ready(self) -> None:
        from exports import tasks  # noqa: F401 - registers the tasks the job mechanism sends by name
        from exports.services import near_duplicates_scan_start
        from projects import hooks

        # New items join the near-duplicate review queue (and the release's split groups).
        hooks.items_imported.connect(lambda *, project, job, **_: near_duplicates_scan_start(project=project))
