from django.apps import AppConfig


class WorkflowConfig(AppConfig):
    name = "workflow"
    verbose_name = "Workflow: steps that span pipeline stages"

    def ready(self) -> None:
        from workflow import tasks  # noqa: F401 - registers the tasks the job mechanism sends by name
