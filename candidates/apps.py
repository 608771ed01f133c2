from django.apps import AppConfig


class CandidatesConfig(AppConfig):
    name = "candidates"

    def ready(self) -> None:
        from candidates import tasks  # noqa: F401 - registers the tasks the job mechanism sends by name
