from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"

    def ready(self) -> None:
        from annotation.services import claims_release_for
        from projects import hooks

        hooks.member_deactivated.connect(lambda *, project, user, **_: claims_release_for(project=project, user=user))
