from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Concord core: errors and the job mechanism"

    def ready(self) -> None:
        from core import tasks  # noqa: F401 - registers the sweeper task
