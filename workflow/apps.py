from django.apps import AppConfig


class WorkflowConfig(AppConfig):
    name = "workflow"
    verbose_name = "Workflow: steps that span pipeline stages"
