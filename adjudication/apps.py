from django.apps import AppConfig


class AdjudicationConfig(AppConfig):
    name = "adjudication"

    def ready(self) -> None:
        from adjudication.services import adjudications_release_for, lexicon_seed
        from projects import hooks

        hooks.project_created.connect(lambda *, project, **_: lexicon_seed(project=project))
        hooks.member_deactivated.connect(
            lambda *, project, user, **_: adjudications_release_for(project=project, user=user)
        )
