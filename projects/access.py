"""Permission-checked fetchers. Views and APIs never fetch a project or an item by bare id.

Not a member of the project -> 404 (its existence is not revealed); a member without the
needed role -> 403.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import PermissionDenied
from django.db import connections
from django.http import Http404

from core.rows import alias_for, columns, model_from_row, width
from projects.models import Item, Membership, Project


def _roles_cache(user) -> dict[int, set[str]]:
    """The caller's active roles by project id, kept on the user object for the request
    (projects.members drops it when memberships change)."""
    cache = getattr(user, "_concord_roles", None)
    if cache is None:
        cache = user._concord_roles = {}
    return cache


def roles_of(*, user, project: Project) -> set[str]:
    if not user.is_authenticated:
        return set()
    cache = _roles_cache(user)
    if project.pk not in cache:
        cache[project.pk] = set(
            Membership.objects.filter(user=user, project=project, is_active=True).values_list("role", flat=True)
        )
    return cache[project.pk]


#: The project with each of the caller's active roles in it (one row per role). Written out: every
#: request runs it, and through the ORM it cost 0.8 ms of CPU where the row costs 0.15 (core.rows).
_PROJECT_AND_ROLES = (
    f'SELECT {columns(Project, "p")}, m."role" FROM "{Project._meta.db_table}" p'
    f' INNER JOIN "{Membership._meta.db_table}" m ON m."project_id" = p."id"'
    ' WHERE m."user_id" = %s AND p."slug" = %s AND m."is_active"'
)


def project_get_for_user(*, user, slug: str, roles: Iterable[str] | None = None) -> Project:
    """The project and the caller's active roles in it, in one query (every request asks)."""
    if not user.is_authenticated:
        raise Http404("No such project")
    alias = alias_for(Project)
    with connections[alias].cursor() as cursor:
        cursor.execute(_PROJECT_AND_ROLES, [user.pk, str(slug)])
        rows = cursor.fetchall()
    if not rows:
        raise Http404("No such project")
    project = model_from_row(Project, rows[0], alias=alias)
    role_at = width(Project)
    mine = _roles_cache(user)[project.pk] = {row[role_at] for row in rows}
    if roles is not None and not (mine & set(roles)):
        raise PermissionDenied("Your role in this project does not allow this")
    project.user_roles = mine
    return project


def item_get_for_user(*, user, project: Project, item_id, roles: Iterable[str] | None = None) -> Item:
    """An item of ``project`` (already access-checked); never an item of another project."""
    if roles is not None and not (roles_of(user=user, project=project) & set(roles)):
        raise PermissionDenied("Your role in this project does not allow this")
    try:
        return Item.objects.get(project=project, pk=int(item_id))
    except (Item.DoesNotExist, ValueError, TypeError):
        raise Http404("No such item") from None


def projects_for_user(*, user):
    if not user.is_authenticated:
        return Project.objects.none()
    return Project.objects.filter(memberships__user=user, memberships__is_active=True).distinct()
