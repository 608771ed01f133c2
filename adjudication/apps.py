from django.apps import AppConfig


class AdjudicationConfig(AppConfig):
    name = "adjudication"

    def ready(self) -> None:
        from adjudication.services import lexicon_seed
        from projects import hooks

        hooks.project_created.connect(lambda *, project, **_: lexicon_seed(project=project))
