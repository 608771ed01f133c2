from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def num(value, digits: int = 3) -> str:
    """0.9081234 -> "0.908"; None -> "–" (an undefined statistic, never shown as 0)."""
    if value is None or value == "":
        return "–"
    try:
        return f"{float(value):.{int(digits)}f}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def ci(value) -> str:
    if not value:
        return "–"
    return f"[{num(value[0])}, {num(value[1])}]"


@register.filter
def pct(value) -> str:
    if value is None:
        return "–"
    return f"{100 * float(value):.0f}%"


@register.filter
def get(mapping, key):
    return (mapping or {}).get(key)
