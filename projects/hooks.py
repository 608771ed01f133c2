"""Extension points of the projects app, for the apps above it (layers run one way).

The projects app announces what happened; a higher app that must react subscribes in its
AppConfig.ready(), so projects never imports it. Receivers run synchronously in the sender's
transaction, in subscription order; they must be fast (enqueue work, don't do it).
"""

from __future__ import annotations

from collections.abc import Callable


class Hook:
    def __init__(self, name: str):
        self.name = name
        self._receivers: list[Callable[..., None]] = []

    def connect(self, receiver: Callable[..., None]) -> Callable[..., None]:
        if receiver not in self._receivers:
            self._receivers.append(receiver)
        return receiver

    def send(self, **kwargs) -> None:
        for receiver in self._receivers:
            receiver(**kwargs)


#: project_created(project=Project): a project exists with its preset applied (e.g. seed its lexicon).
project_created = Hook("project_created")
#: items_imported(project=Project, job=ImportJob): an import job added items (e.g. scan for near-duplicates).
items_imported = Hook("items_imported")
#: member_deactivated(project=Project, user=User): the person can no longer act in the project
#: (e.g. give back the items and adjudications they hold; their finished work stays).
member_deactivated = Hook("member_deactivated")
