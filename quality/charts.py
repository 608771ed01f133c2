"""Server-side SVG charts for the quality pages.

Inline ``<svg>`` with presentation attributes and CSS classes only (no ``style=""``, no
script): the strict Content-Security-Policy holds. Every text goes through ``format_html``
(labels can be user data: usernames, provider names, category names). Each chart carries a
``<title>`` and an ``aria-label`` so it is readable by screen readers, and each mark carries
``data-value`` so tests can read what is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

FONT_W = 6.6  # approximate width of one 12px character, for label columns


def _svg(width: float, height: float, title: str, body: list[str], css: str = "") -> SafeString:
    return format_html(
        '<svg class="qchart {}" viewBox="0 0 {} {}" width="{}" height="{}" role="img" aria-label="{}" '
        'xmlns="http://www.w3.org/2000/svg"><title>{}</title>{}</svg>',
        css,
        round(width),
        round(height),
        round(width),
        round(height),
        title,
        title,
        mark_safe("".join(body)),
    )


def _fmt(v: float | None, digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _label_width(labels: Sequence[str], minimum: int = 40, maximum: int = 220) -> float:
    return max(minimum, min(maximum, max((len(str(s)) for s in labels), default=0) * FONT_W + 12))


def hbar(
    rows: Sequence[tuple], *, title: str, max_value: float | None = None, width: int = 560, css: str = ""
) -> SafeString:
    """Horizontal bars: (label, value, text shown after the bar[, css class of the bar])."""
    if not rows:
        return empty(title)
    bar_h, gap, top = 20, 8, 6
    label_w = _label_width([r[0] for r in rows])
    text_w = max(40, max(len(str(r[2])) for r in rows) * FONT_W + 12)
    plot_w = width - label_w - text_w
    top_value = max_value or max((r[1] for r in rows), default=0) or 1
    body = []
    for i, (label, value, text, *bar_css) in enumerate(rows):
        y = top + i * (bar_h + gap)
        w = max(0.0, plot_w * (value or 0) / top_value)
        body.append(
            format_html(
                '<text class="lbl" x="{}" y="{}" text-anchor="end">{}</text>'
                '<rect class="track" x="{}" y="{}" width="{}" height="{}"/>'
                '<rect class="bar {}" x="{}" y="{}" width="{}" height="{}" data-label="{}" data-value="{}"/>'
                '<text class="val" x="{}" y="{}">{}</text>',
                label_w - 6,
                y + 14,
                label,
                label_w,
                y,
                round(plot_w, 1),
                bar_h,
                bar_css[0] if bar_css else f"b{i % 6}",
                label_w,
                y,
                round(w, 1),
                bar_h,
                label,
                value,
                label_w + w + 5,
                y + 14,
                text,
            )
        )
    return _svg(width, top + len(rows) * (bar_h + gap), title, body, css)


def forest(rows: Sequence[dict], *, title: str, width: int = 560) -> SafeString:
    """Point estimate with its 95% CI per row on a 0..1 scale (negative kappas widen it to -1).

    rows: {label, value, ci: [lo, hi] | None, n, reference: float | None (paper value)}
    """
    if not rows:
        return empty(title)
    row_h, top, bottom = 28, 8, 24
    label_w = _label_width([r["label"] for r in rows], maximum=260)
    right = 60
    lo_axis = -1.0 if any((r.get("ci") or [0, 0])[0] < 0 or (r.get("value") or 0) < 0 for r in rows) else 0.0
    plot_w = width - label_w - right

    def x(v: float) -> float:
        return round(label_w + plot_w * (v - lo_axis) / (1.0 - lo_axis), 1)

    height = top + len(rows) * row_h + bottom
    body = []
    ticks = [-1, -0.5, 0, 0.25, 0.5, 0.75, 1] if lo_axis < 0 else [0, 0.25, 0.5, 0.75, 1]
    for t in ticks:
        body.append(
            format_html(
                '<line class="grid" x1="{}" y1="{}" x2="{}" y2="{}"/>'
                '<text class="tick" x="{}" y="{}" text-anchor="middle">{}</text>',
                x(t),
                top,
                x(t),
                height - bottom,
                x(t),
                height - 8,
                f"{t:g}",
            )
        )
    for i, r in enumerate(rows):
        cy = top + i * row_h + row_h / 2
        body.append(
            format_html('<text class="lbl" x="{}" y="{}" text-anchor="end">{}</text>', label_w - 8, cy + 4, r["label"])
        )
        if r.get("reference") is not None:
            body.append(
                format_html(
                    '<line class="ref" x1="{}" y1="{}" x2="{}" y2="{}"><title>paper: {}</title></line>',
                    x(r["reference"]),
                    cy - 9,
                    x(r["reference"]),
                    cy + 9,
                    _fmt(r["reference"]),
                )
            )
        if r.get("value") is None:
            body.append(format_html('<text class="na" x="{}" y="{}">not defined</text>', label_w + 4, cy + 4))
            continue
        if r.get("ci"):
            lo, hi = r["ci"]
            body.append(
                format_html(
                    '<line class="ci" x1="{}" y1="{}" x2="{}" y2="{}"/><line class="ci" x1="{}" y1="{}" x2="{}" y2="{}"/>'
                    '<line class="ci" x1="{}" y1="{}" x2="{}" y2="{}"/>',
                    x(lo),
                    cy,
                    x(hi),
                    cy,
                    x(lo),
                    cy - 5,
                    x(lo),
                    cy + 5,
                    x(hi),
                    cy - 5,
                    x(hi),
                    cy + 5,
                )
            )
        body.append(
            format_html(
                '<circle class="pt" cx="{}" cy="{}" r="5" data-label="{}" data-value="{}"><title>{}: {} (n={})</title></circle>'
                '<text class="val" x="{}" y="{}">{}</text>',
                x(r["value"]),
                cy,
                r["label"],
                r["value"],
                r["label"],
                _fmt(r["value"]),
                r.get("n", ""),
                width - right + 6,
                cy + 4,
                _fmt(r["value"]),
            )
        )
    return _svg(width, height, title, body, "forest")


def lines(
    x_labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    title: str,
    width: int = 640,
    height: int = 240,
) -> SafeString:
    """Lines on a 0..1 scale (negative values are clipped to the axis), one per series, with a legend."""
    if not x_labels or not series:
        return empty(title)
    left, right, top, bottom = 36, 150, 10, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    step = plot_w / max(1, len(x_labels) - 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        return round(left + (i * step if len(x_labels) > 1 else plot_w / 2), 1), round(
            top + plot_h * (1 - max(0.0, min(1.0, v))), 1
        )

    body = []
    for t in (0, 0.25, 0.5, 0.75, 1):
        y = round(top + plot_h * (1 - t), 1)
        body.append(
            format_html(
                '<line class="grid" x1="{}" y1="{}" x2="{}" y2="{}"/>'
                '<text class="tick" x="{}" y="{}" text-anchor="end">{}</text>',
                left,
                y,
                left + plot_w,
                y,
                left - 4,
                y + 4,
                f"{t:g}",
            )
        )
    every = max(1, len(x_labels) // 8)
    for i, lab in enumerate(x_labels):
        if i % every == 0 or i == len(x_labels) - 1:
            body.append(
                format_html(
                    '<text class="tick" x="{}" y="{}" text-anchor="middle">{}</text>', xy(i, 0)[0], height - 10, lab
                )
            )
    for s, (name, values) in enumerate(series):
        pts = [xy(i, v) for i, v in enumerate(values) if v is not None]
        if len(pts) > 1:
            body.append(
                format_html('<polyline class="line s{}" points="{}"/>', s % 6, " ".join(f"{px},{py}" for px, py in pts))
            )
        for i, v in enumerate(values):
            if v is not None:
                px, py = xy(i, v)
                body.append(
                    format_html(
                        '<circle class="dot s{}" cx="{}" cy="{}" r="3.5" data-value="{}">'
                        "<title>{} {}: {}</title></circle>",
                        s % 6,
                        px,
                        py,
                        v,
                        name,
                        x_labels[i],
                        _fmt(v),
                    )
                )
        ly = top + 14 + s * 18
        body.append(
            format_html(
                '<rect class="key s{}" x="{}" y="{}" width="12" height="4"/><text class="lbl" x="{}" y="{}">{}</text>',
                s % 6,
                width - right + 10,
                ly - 6,
                width - right + 27,
                ly,
                name,
            )
        )
    return _svg(width, height, title, body, "lines")


def columns(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    title: str,
    width: int = 640,
    height: int = 200,
    threshold: float | None = None,
    threshold_label: str = "",
    label_every: int | None = None,
) -> SafeString:
    """Vertical bars (per-day counts, histograms). ``threshold`` (0..1 along x) draws a marker."""
    if not labels:
        return empty(title)
    left, right, top, bottom = 36, 10, 16, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    top_value = max(values) or 1
    slot = plot_w / len(labels)
    body = [
        format_html(
            '<line class="axis" x1="{}" y1="{}" x2="{}" y2="{}"/>', left, top + plot_h, left + plot_w, top + plot_h
        ),
        format_html('<text class="tick" x="{}" y="{}" text-anchor="end">{}</text>', left - 4, top + 4, top_value),
        format_html('<text class="tick" x="{}" y="{}" text-anchor="end">0</text>', left - 4, top + plot_h),
    ]
    every = label_every or max(1, len(labels) // 10)
    for i, (lab, v) in enumerate(zip(labels, values)):
        h = plot_h * v / top_value
        x = left + i * slot + slot * 0.12
        body.append(
            format_html(
                '<rect class="col" x="{}" y="{}" width="{}" height="{}" data-label="{}" data-value="{}"><title>{}: {}</title></rect>',
                round(x, 1),
                round(top + plot_h - h, 1),
                round(slot * 0.76, 1),
                round(h, 1),
                lab,
                v,
                lab,
                v,
            )
        )
        if v:
            body.append(
                format_html(
                    '<text class="colval" x="{}" y="{}" text-anchor="middle">{}</text>',
                    round(x + slot * 0.38, 1),
                    round(top + plot_h - h - 3, 1),
                    v,
                )
            )
        if i % every == 0:
            body.append(
                format_html(
                    '<text class="tick" x="{}" y="{}" text-anchor="middle">{}</text>',
                    round(left + i * slot + slot / 2, 1),
                    height - 18,
                    lab,
                )
            )
    if threshold is not None:
        tx = round(left + plot_w * threshold, 1)
        body.append(
            format_html(
                '<line class="thr" x1="{}" y1="{}" x2="{}" y2="{}"/><text class="thrlbl" x="{}" y="{}">{}</text>',
                tx,
                top - 4,
                tx,
                top + plot_h,
                tx + 3,
                top + 6,
                threshold_label,
            )
        )
    return _svg(width, height, title, body, "columns")


def heatmap(
    categories: Sequence[str], counts: Sequence[Sequence[int]], *, title: str, row_title: str = "", col_title: str = ""
) -> SafeString:
    """Confusion matrix: shade by count relative to the largest cell; the diagonal is outlined."""
    k = len(categories)
    if not k:
        return empty(title)
    cell = 44
    label_w = _label_width(categories, maximum=170)
    top = 112
    width, height = label_w + k * cell + 10, top + k * cell + 10
    peak = max((c for row in counts for c in row), default=0) or 1
    body = [format_html('<text class="axtitle" x="{}" y="12">{} →</text>', label_w, col_title)]
    for j, cat in enumerate(categories):
        cx = label_w + j * cell + cell / 2
        body.append(
            format_html(
                '<text class="lbl" transform="translate({} {}) rotate(-45)">{}</text>', round(cx, 1), top - 6, cat
            )
        )
    for i, cat in enumerate(categories):
        y = top + i * cell
        body.append(
            format_html(
                '<text class="lbl" x="{}" y="{}" text-anchor="end">{}</text>', label_w - 6, y + cell / 2 + 4, cat
            )
        )
        for j in range(k):
            c = counts[i][j]
            shade = 0 if c == 0 else 1 + min(8, int(8 * c / peak))
            body.append(
                format_html(
                    '<rect class="cell h{}{}" x="{}" y="{}" width="{}" height="{}" data-value="{}"><title>{} / {}: {}</title></rect>'
                    '<text class="cellval{}" x="{}" y="{}" text-anchor="middle">{}</text>',
                    shade,
                    " diag" if i == j else "",
                    label_w + j * cell,
                    y,
                    cell - 2,
                    cell - 2,
                    c,
                    cat,
                    categories[j],
                    c,
                    " light" if shade >= 6 else "",
                    label_w + j * cell + cell / 2 - 1,
                    y + cell / 2 + 4,
                    c,
                )
            )
    if row_title:
        body.append(format_html('<text class="axtitle" x="4" y="{}">{} ↓</text>', top - 6, row_title))
    return _svg(width, height, title, body, "heatmap")


def stacked(
    rows: Sequence[tuple[str, Sequence[tuple[float, str, str]]]],
    *,
    title: str,
    width: int = 560,
    legend: Sequence[tuple[str, str]] = (),
) -> SafeString:
    """Horizontal bars on a 0..1 scale made of segments: (label, [(value, css class, tooltip)])."""
    if not rows:
        return empty(title)
    bar_h, gap, top = 20, 8, 6 + (22 if legend else 0)
    label_w = _label_width([r[0] for r in rows])
    plot_w = width - label_w - 60
    body = []
    for i, (css, text) in enumerate(legend):
        lx = label_w + i * 170
        body.append(
            format_html(
                '<rect class="seg {}" x="{}" y="4" width="12" height="12"/><text class="lbl" x="{}" y="14">{}</text>',
                css,
                lx,
                lx + 16,
                text,
            )
        )
    for i, (label, segments) in enumerate(rows):
        y = top + i * (bar_h + gap)
        x = label_w
        body.append(
            format_html(
                '<text class="lbl" x="{}" y="{}" text-anchor="end">{}</text>'
                '<rect class="track" x="{}" y="{}" width="{}" height="{}"/>',
                label_w - 6,
                y + 14,
                label,
                label_w,
                y,
                plot_w,
                bar_h,
            )
        )
        total = 0.0
        for value, css, tip in segments:
            w = plot_w * max(0.0, value)
            body.append(
                format_html(
                    '<rect class="seg {}" x="{}" y="{}" width="{}" height="{}" data-value="{}">'
                    "<title>{}</title></rect>",
                    css,
                    round(x, 1),
                    y,
                    round(w, 1),
                    bar_h,
                    value,
                    tip,
                )
            )
            x += w
            total += value
        body.append(format_html('<text class="val" x="{}" y="{}">{}</text>', round(x + 5, 1), y + 14, f"{total:.0%}"))
    return _svg(width, top + len(rows) * (bar_h + gap), title, body, "stacked")


def empty(title: str) -> SafeString:
    return format_html('<p class="muted qempty">{}: no data yet.</p>', title)


def legend_items(names: Sequence[str]) -> SafeString:
    return format_html_join("", '<span class="qkey s{}">{}</span>', ((i % 6, n) for i, n in enumerate(names)))
