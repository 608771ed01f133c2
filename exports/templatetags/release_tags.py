from __future__ import annotations

from django import template

from exports.selectors import release_files as _release_files

register = template.Library()


@register.simple_tag
def release_files(release) -> list[dict]:
    """The release's top-level files with their sha256 (for the job card and the release page)."""
    return _release_files(release) if release is not None else []
