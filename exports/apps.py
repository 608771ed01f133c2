from django.apps import AppConfig


class ExportsConfig(AppConfig):
    name = "exports"

    def ready(self) -> None:
        from adjudication.selectors import RELEASE_TIME_SOURCES
        from exports import tasks  # noqa: F401 - registers the tasks the job mechanism sends by name
        from exports.selectors import release_latest_at
        from exports.services import near_duplicates_scan_start
        from projects import hooks

        # A reviewer may revise a decision until it is in a published release.
        if release_latest_at not in RELEASE_TIME_SOURCES:
            RELEASE_TIME_SOURCES.append(release_latest_at)

        # New items join the near-duplicate review queue (and the release's split groups).
        hooks.items_imported.connect(lambda *, project, job, **_: near_duplicates_scan_start(project=project))
