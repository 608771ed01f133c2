from django.apps import AppConfig


class QualityConfig(AppConfig):
    name = "quality"
    verbose_name = "Quality: agreement, blind audit, anchoring"

    def ready(self) -> None:
        from quality import tasks  # noqa: F401 - registers the tasks the job mechanism sends by name
