"""Figures as the papers print them: percentages with two decimals, CIs in brackets."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def pct(value) -> str:
    if value is None:
        return "—"
    try:
        return f"{100 * float(value):.2f}"
    except (TypeError, ValueError):
        return "—"


@register.filter
def ci(interval) -> str:
    if not interval:
        return ""
    try:
        low, high = interval
        return f"[{100 * float(low):.2f}, {100 * float(high):.2f}]"
    except (TypeError, ValueError):
        return ""


@register.filter
def signed_pct(value) -> str:
    if value is None:
        return "—"
    return f"{100 * float(value):+.2f}"
