"""Guidelines are Markdown, rendered safely: raw HTML is escaped, never passed through, and
links may only use http(s), mailto or relative URLs (markdown-it's link validation)."""

from __future__ import annotations

import difflib
import functools

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
_SAFE_SCHEMES = ("http:", "https:", "mailto:")


def _validate_link(url: str) -> bool:
    lowered = url.strip().lower()
    if ":" not in lowered.split("/")[0]:
        return True  # relative URL or an anchor
    return lowered.startswith(_SAFE_SCHEMES)


_MD.validateLink = _validate_link


#: A guideline's "# Title" sits inside a page that has its own h1 and h2: headings move down.
HEADING_SHIFT = 2


@functools.lru_cache(maxsize=32)
def render_markdown(text: str) -> SafeString:
    """Keyed on the text itself: an edited guideline is a new key, so nothing goes stale (every
    workspace page shows the project's guideline; rendering it cost about a millisecond)."""
    # markdown-it escapes every character of text and attributes itself ("html": False turns
    # raw HTML blocks and inline tags into escaped text), so its output is safe to mark.
    tokens = _MD.parse(text or "")
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1]) + HEADING_SHIFT)}"
    return mark_safe(_MD.renderer.render(tokens, _MD.options, {}))


def guideline_diff(old: str, new: str) -> list[tuple[str, str]]:
    """Line diff of two versions: [(" " | "+" | "-", line)], for the "what changed" view."""
    out = []
    for line in difflib.ndiff((old or "").splitlines(), (new or "").splitlines()):
        if line[:1] in (" ", "+", "-"):
            out.append((line[:1], line[2:]))
    return out
