from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    name = "projects"
    verbose_name = "Projects, items and schemas"

    def ready(self) -> None:
        from projects import tasks  # noqa: F401 - registers the tasks the job mechanism sends by name
