"""Bounded request parsing: deep nesting answers 400, never 500 (a RecursionError)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.parsers import JSONParser

#: Deepest nesting of a JSON request body (a schema with checklists of pairs needs ~6).
MAX_JSON_DEPTH = 32


def depth_within(value: Any, limit: int) -> bool:
    """Iterative depth check: never recurses, so hostile nesting cannot overflow the stack."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > limit:
                return False
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return True


class BoundedJSONParser(JSONParser):
    """JSON bodies with a nesting limit: deep nesting answers 400, never 500 (RecursionError)."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            data = json.loads(stream.read().decode(encoding))
        except RecursionError:
            raise exceptions.ParseError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels.") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise exceptions.ParseError(f"JSON parse error: {exc}") from None
        if not depth_within(data, MAX_JSON_DEPTH):
            raise exceptions.ParseError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels.")
        return data
