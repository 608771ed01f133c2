from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def show_value(value, widget: str = "") -> str:
    """A field value as short readable text (escaped by the template)."""
    if value is None or value == [] or value == "":
        return "—"
    if widget == "boxes" and isinstance(value, list):
        n = len(value)
        return f"{n} box{'es' if n != 1 else ''}: " + "; ".join(",".join(str(c) for c in b) for b in value)
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if isinstance(mapping, dict) else None
