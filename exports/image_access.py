"""Who may see which item image: the one permission-checked fetcher behind every image URL.

Rule (SPEC section 4 plus the licence flag of SPEC section 5):

* leads: every image of their project;
* annotators and auditors: images of items they hold or held (an annotation or blind-audit
  annotation of theirs exists, whatever its status: a skipped item was seen too);
* reviewers: images of items they review or reviewed: an adjudication task that is or was
  theirs, or a near-duplicate pair of the project (the pair queue is shared by its judges);
* researchers: only what a published release includes, i.e. the image file is shipped in the
  release's ``images/`` (redistributable items only; the others are referenced by hash).

A non-member gets 404 (projects.access), a member whose roles allow none of the above 403.
It lives in exports because it is the lowest app that knows every relation the rule names
(annotations, adjudication tasks, near-duplicate pairs, releases).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import Http404

from adjudication.models import AdjudicationTask
from annotation.models import Annotation, Kind
from exports.models import NearDuplicatePair, Release
from exports.selectors import release_dir, released_file_name
from projects.access import item_get_for_user, roles_of
from projects.imaging import CONTENT_TYPES, image_path
from projects.models import Item, ItemVariant, Project, Role


@dataclass(frozen=True)
class ItemImage:
    item: Item
    path: Path
    content_type: str


def _held(*, user, item: Item, kind: str) -> bool:
    return Annotation.objects.filter(item=item, annotator=user, kind=kind).exists()


def _reviewed(*, user, project: Project, item: Item) -> bool:
    if AdjudicationTask.objects.filter(item=item, reviewer=user).exists():
        return True
    return NearDuplicatePair.objects.filter(project=project).filter(Q(item_a=item) | Q(item_b=item)).exists()


def released_image_name(item: Item) -> str:
    """The image's name inside a release folder (as exports.build.records writes it)."""
    return released_file_name(item.image_sha256, item.image)


def released_variant_name(variant: ItemVariant) -> str:
    """A variant's name inside a release folder (next to the originals, by content)."""
    return released_file_name(variant.image_sha256, variant.image)


def _released(*, project: Project, name: str) -> bool:
    # The release folder is the source of truth: it is what researchers download, and it holds
    # an image only when the item was redistributable when that release was built.
    return any((release_dir(r) / name).is_file() for r in Release.objects.filter(project=project).only("directory"))


def item_image_get_for_user(*, user, project: Project, item_id, variant: str | None = None) -> ItemImage:
    """The image of an item of ``project`` (already membership-checked) if ``user`` may see it;
    with ``variant``, that derived image of it (projects.ocr), under the same rule.

    Raises Http404 for an item outside the project or a variant it does not have,
    PermissionDenied when the rule above refuses, ValueError when the stored path is unusable
    (the caller answers 404).
    """
    item = item_get_for_user(user=user, project=project, item_id=item_id)
    derived = ItemVariant.objects.filter(item=item, kind=variant).first() if variant is not None else None
    name = released_image_name(item) if derived is None else released_variant_name(derived)
    roles = roles_of(user=user, project=project)
    allowed = (
        Role.LEAD in roles
        or (Role.ANNOTATOR in roles and _held(user=user, item=item, kind=Kind.ANNOTATION))
        or (Role.AUDITOR in roles and _held(user=user, item=item, kind=Kind.AUDIT))
        or (Role.REVIEWER in roles and _reviewed(user=user, project=project, item=item))
        or (Role.RESEARCHER in roles and _released(project=project, name=name))
    )
    if not allowed:
        raise PermissionDenied("You may not see this item's image: it is not among the items your role gives you.")
    if variant is not None and derived is None:  # after the rule: who may not see it learns nothing
        raise Http404("This item has no such image variant (yet).")
    rel = item.image if derived is None else derived.image
    ext = rel.rsplit(".", 1)[-1]
    return ItemImage(item=item, path=image_path(rel), content_type=CONTENT_TYPES.get(ext, "application/octet-stream"))
