"""User actions and seconds per item in the annotation workspace, the fastest way the page allows.

    .venv/bin/python bench/annotate_actions.py [--items 20] [--port N]
                                               [--strategy keys|keys-scratch|best-candidate|scratch]
                                               [--truth demo_truth|belief] [--prefill none|agreement]
                                               [--axe] [--keep]

A baseline for UI changes: run it on today's UI, change the UI, run it again, compare the last
(JSON) line of both runs.

What it does, all on 127.0.0.1, in a throwaway folder (nothing of the checkout's var/ is used):
1. a temporary CONCORD_VAR_DIR with its own SQLite database: migrate, collectstatic, load_demo.
   The demo's "Demo: Meme3W" candidates come from replay models and are generated inline by
   load_demo (no Celery worker needed; the script checks that every item has its candidates);
2. gunicorn on a free port (or --port), stopped at the end;
3. Chromium (Playwright) logs in as ``annotator1``, opens the project, accepts the content
   warning, and annotates ``--items`` items towards the intended answer:
   - ``--truth demo_truth`` (default): ``projects.demo.demo_truth`` of the item's text (the
     demo's ground truth: label, category, entity, mention; it never has a box);
   - ``--truth belief``: ``quality.demo.belief`` (demo_truth plus the faithful model's box on
     harmful items: what the demo's simulated annotators believe), so boxes must be right too;
   with ``--strategy keys`` (default since issue 17) a skilled user on the keyboard who reads the
   candidates and picks the cheapest plan: Shift+letter takes the best candidate whole, the
   focused field is fixed with a candidate's letter, a digit, typing or M (the mention), N/P move
   between fields, Delete clears one, Ctrl+Enter submits and opens the next item; the mouse only
   draws boxes. ``--strategy keys-scratch``: the same keys, candidates ignored. The mouse
   strategies of the baseline: ``best-candidate`` ("Use all" of the best candidate, then fix what
   differs, using single-field "Use" buttons where a candidate has the right value) and
   ``scratch`` (candidates ignored: everything by hand);
4. counts every action through one wrapper (:class:`Actions`): each click, each key press (a
   chord such as Ctrl+A is one press; typing a word is one press per character), each drag (one
   mouse action, whatever its length), and each scroll needed to bring a target into the
   viewport (one wheel action; depends on ``--viewport``). Reading the screen is not an action;
   the wall time per item is machine time (server round trips, rendering), a lower bound with no
   human reading or decision time;
5. checks the submitted annotations in the database against the intended answers;
6. prints the figures, then one JSON line (``"bench": "annotate_actions"``).

``--axe`` also runs axe-core (``npm install axe-core`` into a temporary folder, injected with the
CSP bypassed) on the annotation page, the reviewer's pages, the lead's quality dashboard and the
releases page, and prints the serious/critical violations by rule id.

Where to change things when the UI changes: ``SEL`` (today's selectors), ``MOUSE_ONLY_TODAY``
(which steps have no keyboard shortcut today) and ``plan_item`` / ``plan_keys`` (what each fix
costs with today's widgets, and which of the ways to do it is taken). ``do_item`` /
``do_item_keys`` are the strategies for one item; everything else (setup, counting, timing,
report) does not depend on the UI.

Figures (20 demo items, viewport 1440x1000, truth demo_truth; seconds are machine time):

- Baseline, the UI before issue 17 (commit 1ecc9b1), ``--strategy best-candidate``:
  4.25 actions per item (min 3, max 5; harmful 4.92, non-harmful 3.00), 85 actions, all 85 with
  the mouse (72 clicks, 13 scrolls: next item 20, use all 20, submit 20, use one field 12,
  scroll to submit 13); 0.86 s per item in the issue's run (0.544 s in a rerun on the same
  machine). axe-core: 2 serious color-contrast violations on the reviewer's task page
  (``.toggle.a2``, the ``.a2`` column header); none on the other pages.
- After issue 17 (same machine, same day), 20/20 correct each time:
  ``--strategy keys``: 2.65 actions per item (min 2, max 4; harmful 3.00, non-harmful 2.00; the
  first item's 1 is the Enter on the queue page), 53 actions, 0 with the mouse (Shift+letter 20,
  Ctrl+Enter 20, letter 12, Enter 1); 0.37-0.45 s per item. ``--strategy best-candidate`` (the
  mouse on the new page): 3.00 actions per item, 0.52 s. ``--strategy keys-scratch``: 24.1 per
  item (typing the entity is most of it), no mouse; with ``--truth belief`` 25.4, the 13 box
  drags being the only mouse actions. axe-core 4.14.1: no serious or critical violation on any
  page of ``--axe`` (annotation, annotation with every field, audit, reviewer's home and task,
  dashboard, releases).
  The goal of a third (<= 1.42 per item) is not reached: an item takes at least two decisions
  (which candidate, submit) plus one per field to fix; see the report of issue 17.
- With Alt+letter / "+ submit" (take a candidate whole and submit in one action; nothing is
  pre-filled), 2026-12-01, 20/20 correct: ``--strategy keys`` 2.25 actions per item (45: Shift+letter
  12, letter 12, Ctrl+Enter 12, Alt+letter 8, Enter 1; min 1, max 4), 0 with the mouse, 0.56 s
  per item. An item a candidate gets right takes 1 action (8 of the 20: the 7 non-harmful and 1
  harmful), a third of the baseline's 3.00 (non-harmful) and a quarter of its 4 (harmful); the 12
  demo items where the best candidate has one field wrong still take 3 (take, fix, submit), 61%
  of the baseline's 4.92. ``--strategy best-candidate`` (the mouse): 2.45 per item, 0.93 s.
- With ``--prefill agreement`` (the stage starts its form from what most candidates agree on,
  projects.workflow ``prefill``), 2026-12-02, 20/20 correct: ``--strategy keys`` **1.35 actions
  per item** (27: Alt+letter 12, Ctrl+Enter 8, Shift+letter 3, letter 3, Enter 1; min 1, max 3),
  0 with the mouse, 0.52 s per item: 32% of the baseline's 4.25, within the goal of a third
  (<= 1.42). 17 of the 20 items take one key (Ctrl+Enter on the agreement, or Alt+letter where
  one candidate is right and the agreement is not); 3 still take three.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = Path(sys.executable)
GUNICORN = PY.parent / "gunicorn"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

PROJECT = "demo-meme3w"
PROJECT_NAME = "Demo: Meme3W"
SIMULATED = "demo-meme3w-simulated"
ANNOTATOR = "annotator1"
PASSWORD_SUFFIX = "-demo-pass"  # projects.demo.DEMO_PASSWORD_SUFFIX
BOX_TOLERANCE = 6  # a box drawn with the mouse is right within this many 1/1000 of the image

# --------------------------------------------------------------------------- today's UI
# Selectors of TODAY's workspace (templates/annotation/workspace.html, static/annotation/*.js).
# Old-UI specific: when the page gains shortcuts or another layout, update these, the
# MOUSE_ONLY_TODAY table and the costs in plan_item().
SEL = {
    "login_user": "#id_username",
    "login_password": "#id_password",
    "project_link": f"a:text-is('{PROJECT_NAME}')",
    "annotate_link": "main a:text-is('Annotate')",
    "accept_warning": "#accept-warning",
    "ready": "#workspace.ready",
    "fields": "#ann-form .field",  # data-name, data-visible-*; widget root inside
    "use_all": "[data-use-all='{letter}']",  # "Use all" of candidate {letter}
    "use_all_submit": "[data-use-all-submit='{letter}']",  # "+ submit" of candidate {letter}
    "use_field": "[data-use-field='{field}'][data-letter='{letter}']",  # "Use" one field of a candidate
    "radio": "#field-{field} input[type=radio][value='{value}']",
    "text_input": "#field-{field} input[type=text]",  # entity widget
    "span_use": "[data-span-use='{field}']",  # "Use selection" (mention from the text selection)
    "span_clear": "[data-span-clear='{field}']",
    "box_delete": "#field-{field} .box-list li:nth-child({n}) button[aria-label^='Delete box']",
    "box_rect": "#box-canvas rect.box[data-index='{i}']",
    "canvas": "#box-canvas",
    "item_text": "#item-text",
    "submit": "#submit-btn",
    "submitted": "#ws-banner.ok",
    "form_error": "[data-error-for]:not([hidden]), #form-error:not([hidden])",
    "next": "#next-btn",  # the queue page (autofocused: Enter)
    "current": "#ann-form .field.current",  # the focused field (keys act on it)
    "mention_field": "#ann-form .field[data-mention]",
    "done_today": "#done-today",
}

# Steps and whether today's page lacks a keyboard way to do them (True: the mouse is needed).
# Before issue 17 every step of an item but typing was True (85 of 85 actions were mouse-only);
# since then only drawing a box is (Tab-walking through the page is not counted as a shortcut).
MOUSE_ONLY_TODAY = {
    "login: focus username": True,
    "login: type username": False,
    "login: Tab to password": False,
    "login: type password": False,
    "login: Enter": False,
    "open project": True,
    "open Annotate": True,
    "accept content warning": True,
    "next item": False,  # Enter on the queue page; then "next item after submit"
    "use all": False,  # Shift+letter
    "use all and submit": False,  # Alt+letter
    "use one field of a candidate": False,  # the letter, on the focused field
    "choose radio": False,  # digits
    "focus text field": False,  # Enter on the focused field
    "select all in text field": False,
    "type text": False,
    "select mention in text (drag)": False,  # M, then arrows
    "use selection": False,  # a selection fills the mention at once
    "clear mention": False,  # Delete on the field, or a click on the highlight
    "delete box (list button)": False,  # Delete (selected box) / Delete on the field
    "select box on canvas": False,  # Tab on the image
    "delete box (Delete key)": False,
    "draw box (drag)": True,
    # "scroll into view: <step>" (a wheel action before <step>) counts as mouse-only.
    "submit (button)": False,  # Ctrl+Enter
    "submit (Enter in text field)": False,
    # The keyboard of issue 17 (--strategy keys / keys-scratch): everything but drawing.
    "next item (Enter)": False,
    "take candidate whole (Shift+letter)": False,
    "take candidate whole and submit (Alt+letter)": False,
    "take field from candidate (letter)": False,
    "next/previous field (N/P)": False,
    "choose option (digit)": False,
    "type in field (Enter)": False,
    "leave field (Esc)": False,
    "clear field (Delete)": False,
    "mention by keyboard (M, arrows, Enter)": False,
    "submit (Ctrl+Enter)": False,
}


# --------------------------------------------------------------------------- the action wrapper


@dataclass
class Action:
    item: int  # 0 = session setup, 1.. = item number
    kind: str  # click | key | drag | scroll
    step: str  # a key of MOUSE_ONLY_TODAY
    t0: float  # perf_counter at start
    seconds: float = 0.0  # until the next action started (the page's reaction included)


class Actions:
    """Every user action goes through here: one count per click, key press, drag or scroll."""

    def __init__(self, page, viewport):
        self.page = page
        self.viewport = viewport
        self.log: list[Action] = []
        self.item = 0

    def _add(self, kind, step):
        self.log.append(Action(self.item, kind, step, time.perf_counter()))

    def _reach(self, locator, step):
        """A target below/above the fold costs one scroll (Playwright would scroll silently)."""
        box = locator.bounding_box()
        if box is None:
            raise RuntimeError(f"not visible: {locator}")
        if (
            box["y"] < 0
            or box["y"] + box["height"] > self.viewport["height"]
            or box["x"] < 0
            or box["x"] + box["width"] > self.viewport["width"]
        ):
            self._add("scroll", f"scroll into view: {step}")
            locator.scroll_into_view_if_needed()

    def click(self, selector, step):
        loc = self.page.locator(selector) if isinstance(selector, str) else selector
        loc.wait_for(state="visible")
        self._reach(loc, step)
        self._add("click", step)
        loc.click()

    def press(self, key, step):
        self._add("key", step)
        self.page.keyboard.press(key)

    def type(self, text, step):
        for ch in text:
            self._add("key", step)
            self.page.keyboard.type(ch)

    def drag(self, start, end, step, *, within=None):
        """One mouse action: press at ``start``, move, release at ``end`` (viewport pixels)."""
        if within is not None:
            self._reach(within, step)
            start, end = within_points(within, start, end)
        self._add("drag", step)
        m = self.page.mouse
        m.move(*start)
        m.down()
        m.move((start[0] + end[0]) / 2, (start[1] + end[1]) / 2, steps=4)
        m.move(*end, steps=4)
        m.up()

    def close_timings(self, until):
        for a, b in zip(self.log, self.log[1:] + [None]):
            if b is None or b.item != a.item:
                a.seconds = max(0.0, until.get(a.item, a.t0) - a.t0)
            else:
                a.seconds = b.t0 - a.t0


def within_points(locator, start, end):
    """``start``/``end`` as callables of the locator's bounding box -> viewport points."""
    box = locator.bounding_box()
    return start(box), end(box)


# --------------------------------------------------------------------------- planning one item
# A skilled user with today's page: each op is (step, cost, args). Costs are what the executor
# will count; the plan with the fewest actions wins, ties go to the plan using more keys.


@dataclass
class Field:
    name: str
    widget: str
    vis_field: str | None
    vis_in: list[str] | None


@dataclass
class Plan:
    base: str | None  # candidate letter taken with "Use all", or None
    ops: list[tuple] = field(default_factory=list)

    @property
    def cost(self):
        return sum(op[1] for op in self.ops)

    @property
    def keys(self):
        return sum(op[1] for op in self.ops if op[0] in KEY_OPS)


KEY_OPS = {"type_text", "enter", "box_delete_key"}


def absent(f: Field):
    return [] if f.widget in ("boxes", "checkboxes", "textlist") else None


def with_visibility(values: dict, fields: list[Field]) -> dict:
    """workspace.js applyVisibility(): a hidden field holds its absence value."""
    v, visible = dict(values), {}
    for f in fields:
        show = True
        if f.vis_field:
            show = bool(visible.get(f.vis_field)) and v.get(f.vis_field) in f.vis_in
        visible[f.name] = show
        if not show:
            v[f.name] = absent(f)
    return v


def boxes_match(a, b, tol=0):
    a, b = a or [], b or []
    if len(a) != len(b):
        return False
    return all(any(all(abs(x - y) <= tol for x, y in zip(p, q)) for q in b) for p in a)


def value_ok(f: Field, have, want, tol=0):
    if f.widget == "boxes":
        return boxes_match(have, want, tol)
    return (have if have not in ("",) else None) == want


def field_ops(f: Field, have, want, candidates: dict, use_candidates: bool) -> list[tuple]:
    """The cheapest ways today's widgets offer to turn ``have`` into ``want`` (one field)."""
    if value_ok(f, have, want):
        return []
    options: list[list[tuple]] = []
    if use_candidates:
        for letter, cand in sorted(candidates.items()):
            if f.name in cand and value_ok(f, cand[f.name], want):
                options.append([("use_field", 1, f.name, letter)])
                break
    if f.widget == "radio":
        options.insert(0, [("radio", 1, f.name, want)])  # the radio itself first: ties with 'Use'
    elif f.widget in ("entity", "textarea"):
        if want:
            options.append([("type_text", 1 + (1 if have else 0) + len(want), f.name, want, bool(have))])
    elif f.widget == "span":
        if want is None:
            options.append([("span_clear", 1, f.name)])
        else:
            options.append([("select_text", 1, f.name, want), ("span_use", 1, f.name)])
    elif f.widget == "boxes":
        have, want = have or [], want or []
        extra = [i for i, b in enumerate(have) if not any(boxes_match([b], [w], BOX_TOLERANCE) for w in want)]
        missing = [w for w in want if not any(boxes_match([b], [w], BOX_TOLERANCE) for b in have)]
        # Delete the extra boxes, highest index first (indices shift), then draw the missing ones.
        # Mouse: the list's "Delete" button (1 click). Keyboard: today the canvas must first get
        # focus and the box be selected, with a click on the box (1 click), then Delete (1 key).
        mouse = [("box_delete", 1, f.name, i) for i in sorted(extra, reverse=True)]
        keys = [
            op
            for i in sorted(extra, reverse=True)
            for op in (("box_select", 1, f.name, i), ("box_delete_key", 1, f.name, i))
        ]
        draw = [("box_draw", 1, f.name, w) for w in missing]
        options.append(mouse + draw)
        options.append(keys + draw)
    else:
        raise NotImplementedError(f"widget {f.widget!r} ({f.name})")
    return min(options, key=lambda ops: (sum(o[1] for o in ops), -sum(o[1] for o in ops if o[0] in KEY_OPS)))


def plan_item(fields: list[Field], values: dict, candidates: dict, want: dict, *, use_candidates: bool) -> Plan:
    """Fewest actions from the page's current values to ``want`` with today's widgets."""
    plans = []
    bases = [None] + (sorted(candidates) if use_candidates else [])
    for base in bases:
        start = dict(values)
        plan = Plan(base)
        if base is not None:
            # "Use all": every field the candidate has, in schema order, then visibility.
            start.update({k: v for k, v in candidates[base].items() if k in {f.name for f in fields}})
            plan.ops.append(("use_all", 1, base))
        state = with_visibility(start, fields)
        # Schema order: a parent (the label) first, so its children are visible for their fixes.
        fixes = []
        for f in fields:
            ops = field_ops(f, state.get(f.name, absent(f)), want.get(f.name, absent(f)), candidates, use_candidates)
            if ops:
                state[f.name] = want.get(f.name, absent(f))
                state = with_visibility(state, fields)  # e.g. "harmful" shows the target fields
            fixes.extend(ops)
        # Typing last, so that Enter in the text field submits (one key instead of a click).
        fixes.sort(key=lambda op: op[0] == "type_text")
        plan.ops.extend(fixes)
        if fixes and fixes[-1][0] == "type_text":
            plan.ops.append(("enter", 1))
        elif base is not None and not fixes:
            plan.ops = [("use_all_submit", 1, base)]  # "+ submit" under the candidate
        else:
            plan.ops.append(("submit", 1))
        plans.append(plan)
    return min(plans, key=lambda p: (p.cost, -p.keys, p.base is None))


# --------------------------------------------------------------------------- doing one item


def read_fields(page) -> list[Field]:
    out = []
    for h in page.locator(SEL["fields"]).element_handles():
        vis_in = h.get_attribute("data-visible-in")
        widget = h.query_selector("[data-widget]")  # the field's widget root (templates/fields/)
        out.append(
            Field(
                h.get_attribute("data-name"),
                widget.get_attribute("data-widget"),
                h.get_attribute("data-visible-field"),
                vis_in.split("|") if vis_in else None,
            )
        )
    return out


def text_points(page, words):
    """Viewport points just inside the first and last character of ``words`` in the item text."""
    return page.evaluate(
        """([sel, words]) => {
            const el = document.querySelector(sel);
            const full = el.textContent;
            const at = full.indexOf(words);
            if (at < 0) return null;
            const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
            const nodes = [];
            let n, pos = 0;
            while ((n = walker.nextNode())) { nodes.push([n, pos]); pos += n.textContent.length; }
            function rectAt(i) {
                for (const [node, p] of nodes) {
                    if (i >= p && i < p + node.textContent.length) {
                        const r = document.createRange();
                        r.setStart(node, i - p); r.setEnd(node, i - p + 1);
                        const b = r.getBoundingClientRect();
                        return {left: b.left, right: b.right, top: b.top, bottom: b.bottom};
                    }
                }
                return null;
            }
            return {first: rectAt(at), last: rectAt(at + words.length - 1)};
        }""",
        [SEL["item_text"], words],
    )


def execute(act: Actions, page, op: tuple):
    kind = op[0]
    if kind == "use_all":
        act.click(SEL["use_all"].format(letter=op[2]), "use all")
    elif kind == "use_all_submit":
        act.click(SEL["use_all_submit"].format(letter=op[2]), "use all and submit")
    elif kind == "use_field":
        act.click(SEL["use_field"].format(field=op[2], letter=op[3]), "use one field of a candidate")
    elif kind == "radio":
        act.click(SEL["radio"].format(field=op[2], value=op[3]), "choose radio")
    elif kind == "type_text":
        _, _, name, text, nonempty = op
        act.click(SEL["text_input"].format(field=name), "focus text field")
        if nonempty:
            act.press("Control+A", "select all in text field")
        act.type(text, "type text")
    elif kind == "select_text":
        words = op[3]
        act._reach(page.locator(SEL["item_text"]), "select mention in text (drag)")
        pts = text_points(page, words)
        if pts is None or pts["first"] is None:
            raise RuntimeError(f"mention {words!r} not in the item text")
        f, last = pts["first"], pts["last"]
        start = (f["left"] + 1, (f["top"] + f["bottom"]) / 2)
        end = (last["right"] - 1, (last["top"] + last["bottom"]) / 2)
        act.drag(start, end, "select mention in text (drag)")
    elif kind == "span_use":
        act.click(SEL["span_use"].format(field=op[2]), "use selection")
    elif kind == "span_clear":
        act.click(SEL["span_clear"].format(field=op[2]), "clear mention")
    elif kind == "box_delete":
        act.click(SEL["box_delete"].format(field=op[2], n=op[3] + 1), "delete box (list button)")
    elif kind == "box_select":
        rect = page.locator(SEL["box_rect"].format(i=op[3]))
        act._reach(rect, "select box on canvas")
        box = rect.bounding_box()
        # Click inside the box but away from its label and corners (a click without movement
        # selects it and focuses the canvas; it does not move it).
        act._add("click", "select box on canvas")
        page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.6)
    elif kind == "box_delete_key":
        act.press("Delete", "delete box (Delete key)")
    elif kind == "box_draw":
        x1, y1, x2, y2 = op[3]
        canvas = page.locator(SEL["canvas"])
        act.drag(
            lambda b: (b["x"] + b["width"] * x1 / 1000, b["y"] + b["height"] * y1 / 1000),
            lambda b: (b["x"] + b["width"] * x2 / 1000, b["y"] + b["height"] * y2 / 1000),
            "draw box (drag)",
            within=canvas,
        )
    elif kind == "submit":
        act.click(SEL["submit"], "submit (button)")
    elif kind == "enter":
        act.press("Enter", "submit (Enter in text field)")
    else:
        raise ValueError(kind)


# --------------------------------------------------------------------------- the keyboard (issue 17)
# The page's own rules (static/annotation/workspace.js), so that the planner predicts where the
# focus goes: the first visible field on arrival; after Shift+X the first field where X stands
# alone, else the first where the candidates differ; after a letter the next field where they
# differ (else the next field); after a digit on a single choice the next visible field.

CJK = "\u3005-\u3007\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
WORD = re.compile(f"[{CJK}]|[^\\W{CJK}]+", re.UNICODE)  # static/fields/widgets.js wordSpans()


def differing(fields: list[Field], candidates: dict) -> set[str]:
    out = set()
    for f in fields:
        seen = [json.dumps(c[f.name], sort_keys=True) for _, c in sorted(candidates.items()) if f.name in c]
        if len(set(seen)) > 1:
            out.add(f.name)
    return out


def visible_names(fields: list[Field], values: dict) -> list[str]:
    vis, shown = {}, []
    for f in fields:
        ok = True
        if f.vis_field:
            ok = bool(vis.get(f.vis_field)) and values.get(f.vis_field) in f.vis_in
        vis[f.name] = ok
        if ok:
            shown.append(f.name)
    return shown


def first_alone(fields, values, candidates, letter, diff):
    mine = candidates[letter]
    for name in visible_names(fields, values):
        if (
            name in mine
            and name in diff
            and all(other == letter or name not in c or c[name] != mine[name] for other, c in candidates.items())
        ):
            return name
    return None


def mention_key_sequence(text: str, have: str | None, want: str) -> list[str] | None:
    """The keys of M-mode selection (workspace.js mentionKey) from the page's starting cursor to
    ``want``, M and Enter included: word moves, Alt(+Shift) arrows for single characters."""
    words = [(m.start(), m.end()) for m in WORD.finditer(text)]
    ta = text.find(want)
    if ta < 0 or not words or not want:
        return None
    tb = ta + len(want)
    a, b = words[0]
    if have and text.find(have) >= 0:
        a, b = text.find(have), text.find(have) + len(have)
    keys = ["m"]
    home = next((w for w in words if w[0] <= ta < w[1]), None) or max(
        (w for w in words if w[0] <= ta), default=words[0]
    )
    for _ in range(len(words) + 2):
        if (a, b) == home:
            break
        if home[0] >= b:
            a, b = next((w for w in words if w[0] >= b), words[-1])
            keys.append("ArrowRight")
        elif home[1] <= a:
            a, b = [w for w in words if w[1] <= a][-1]
            keys.append("ArrowLeft")
        else:
            a, b = words[0]
            keys.append("Home")
    while a < ta:
        a += 1
        keys.append("Alt+ArrowRight")
    while b < tb:
        nxt = next((w for w in words if w[1] > b), None)
        if nxt and nxt[1] <= tb:
            b = nxt[1]
            keys.append("Shift+ArrowRight")
        else:
            b += 1
            keys.append("Alt+Shift+ArrowRight")
    while b > tb:
        b -= 1
        keys.append("Alt+Shift+ArrowLeft")
    if text[a:b] != want:
        return None
    return keys + ["Enter"]


def mention_keys(text: str, have: str | None, want: str) -> int | None:
    seq = mention_key_sequence(text, have, want)
    return len(seq) if seq else None


def plan_keys(
    fields: list[Field], values: dict, candidates: dict, want: dict, *, use_candidates: bool, item_text: str
) -> Plan:
    """Fewest key presses (and drags for boxes) from the page's values to ``want``."""
    diff = differing(fields, candidates) if use_candidates else set()
    names = [f.name for f in fields]
    by = {f.name: f for f in fields}
    plans = []
    for base in [None] + (sorted(candidates) if use_candidates else []):
        state = dict(values)
        plan = Plan(base)
        first = visible_names(fields, state)[0]
        focus = first
        if base is not None:
            state.update({k: v for k, v in candidates[base].items() if k in by})
            plan.ops.append(("take_all", 1, base))
            state = with_visibility(state, fields)
            focus = (
                first_alone(fields, state, candidates, base, diff)
                or next((n for n in visible_names(fields, state) if n in diff), None)
                or focus
            )
        for name in names:
            f = by[name]
            vis = visible_names(fields, state)
            if name not in vis:
                continue
            have, goal = state.get(name, absent(f)), want.get(name, absent(f))
            if value_ok(f, have, goal, BOX_TOLERANCE if f.widget == "boxes" else 0):
                continue
            nav = abs(vis.index(name) - vis.index(focus)) if focus in vis else vis.index(name) + 1
            options = []
            for letter, cand in sorted(candidates.items()) if use_candidates else []:
                if name in cand and value_ok(f, cand[name], goal):
                    options.append((1, [("key_letter", 1, name, letter)], "letter"))
                    break
            if f.widget == "radio" and goal is not None:
                options.append((1, [("key_digit", 1, name, goal)], "digit"))
            if goal in (None, []) and not value_ok(f, have, goal):
                options.append((1, [("key_clear", 1, name)], "stay"))
            if f.widget in ("entity", "textarea") and goal:
                options.append(
                    (
                        2 + (1 if have else 0) + len(goal),
                        [("key_type", 2 + (1 if have else 0) + len(goal), name, goal, bool(have))],
                        "stay",
                    )
                )
            if f.widget == "span" and goal:
                k = mention_keys(item_text, have, goal)
                if k is not None:
                    options.append((k, [("key_mention", k, name, goal, have)], "stay"))
            if f.widget == "boxes" and goal:
                ops = ([("key_clear", 1, name)] if have else []) + [("box_draw", 1, name, b) for b in goal]
                options.append((len(ops), ops, "stay"))
            if not options:
                raise NotImplementedError(f"no way to set {name} to {goal!r}")
            cost, ops, then = min(options, key=lambda o: o[0])
            plan.ops.append(("nav", nav, name))
            plan.ops.extend(ops)
            state[name] = goal
            state = with_visibility(state, fields)
            vis = visible_names(fields, state)
            after = vis[vis.index(name) + 1 :] if name in vis else []
            if then == "letter":
                focus = next((n for n in after if n in diff), None) or (after[0] if after else name)
            elif then == "digit":
                focus = after[0] if after else name
            else:
                focus = name
        if [op[0] for op in plan.ops] == ["take_all"]:
            # Nothing to fix: Alt+letter takes the candidate whole and submits (one chord).
            plan.ops = [("take_all_submit", 1, base)]
        else:
            plan.ops.append(("key_submit", 1))
        plans.append(plan)
    return min(plans, key=lambda p: (p.cost, p.base is None))


def go_to_field(act: Actions, page, name: str):
    """N / P until the focused field is ``name`` (each press counted), reading the page."""
    for _ in range(12):
        cur = page.locator(SEL["current"]).get_attribute("data-name")
        if cur == name:
            return
        order = [f.name for f in read_fields(page) if page.locator(f"#field-{f.name}").is_visible()]
        key = "n" if order.index(name) > order.index(cur) else "p"
        act.press(key, "next/previous field (N/P)")
    raise RuntimeError(f"could not reach field {name}")


def execute_keys(act: Actions, page, op: tuple):
    kind = op[0]
    if kind == "take_all":
        act.press(f"Shift+{op[2]}", "take candidate whole (Shift+letter)")
    elif kind == "take_all_submit":
        act.press(f"Alt+{op[2]}", "take candidate whole and submit (Alt+letter)")
    elif kind == "nav":
        go_to_field(act, page, op[2])
    elif kind == "key_letter":
        act.press(op[3].lower(), "take field from candidate (letter)")
    elif kind == "key_digit":
        options = page.locator(f"#field-{op[2]} input[type=radio]")
        values = [options.nth(i).get_attribute("value") for i in range(options.count())]
        act.press(str(values.index(op[3]) + 1), "choose option (digit)")
    elif kind == "key_clear":
        act.press("Delete", "clear field (Delete)")
    elif kind == "key_type":
        _, _, name, text, nonempty = op
        act.press("Enter", "type in field (Enter)")
        if nonempty:
            act.press("Control+A", "select all in text field")
        act.type(text, "type text")
        act.press("Escape", "leave field (Esc)")
    elif kind == "key_mention":
        _, _, name, want, have = op
        text = page.locator(SEL["item_text"]).inner_text()
        for key in mention_key_sequence(text, have, want):
            act.press(key, "mention by keyboard (M, arrows, Enter)")
        got = page.locator(f"#field-{name} input").input_value()
        if got != want:
            raise RuntimeError(f"keyboard mention gave {got!r}, not {want!r}")
    elif kind == "box_draw":
        x1, y1, x2, y2 = op[3]
        canvas = page.locator(SEL["canvas"])
        act.drag(
            lambda b: (b["x"] + b["width"] * x1 / 1000, b["y"] + b["height"] * y1 / 1000),
            lambda b: (b["x"] + b["width"] * x2 / 1000, b["y"] + b["height"] * y2 / 1000),
            "draw box (drag)",
            within=canvas,
        )
    elif kind == "key_submit":
        act.press("Control+Enter", "submit (Ctrl+Enter)")
    else:
        raise ValueError(kind)


def do_item_keys(act: Actions, page, want: dict, *, use_candidates: bool) -> Plan:
    """THE KEYBOARD STRATEGY for one item (issue 17): plan, press, and leave when the page has
    moved on to the next item (auto-advance)."""
    fields = read_fields(page)
    ws = page.locator("#workspace")
    candidates = json.loads(ws.get_attribute("data-candidates") or "{}")
    values = json.loads(ws.get_attribute("data-state") or "{}").get("values") or {}
    text = page.locator(SEL["item_text"]).inner_text()
    plan = plan_keys(fields, values, candidates, want, use_candidates=use_candidates, item_text=text)
    here = page.url
    for op in plan.ops:
        execute_keys(act, page, op)
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_url(lambda url: url != here, timeout=10000)
    except PlaywrightTimeout as exc:
        errors = page.locator(SEL["form_error"]).all_inner_texts()
        raise RuntimeError(f"submit refused or no next item: {errors} plan={plan.ops}") from exc
    return plan


def do_item(act: Actions, page, want: dict, *, use_candidates: bool) -> Plan:
    """THE STRATEGY for one item on today's page (the workspace is open and ready).

    Reads the fields and the candidates (what the user sees in the candidates table), picks the
    cheapest plan, executes it through the wrapper and waits for "Submitted". Rewrite this (and
    plan_item) for a new UI; the rest of the script stays.
    """
    fields = read_fields(page)
    ws = page.locator("#workspace")
    candidates = json.loads(ws.get_attribute("data-candidates") or "{}")
    values = json.loads(ws.get_attribute("data-state") or "{}").get("values") or {}
    plan = plan_item(fields, values, candidates, want, use_candidates=use_candidates)
    here = page.url
    for op in plan.ops:
        execute(act, page, op)
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        # "Submitted", then (auto-advance, on by default since issue 17) the next item.
        page.wait_for_url(lambda url: url != here, timeout=10000)
    except PlaywrightTimeout as exc:
        errors = page.locator(SEL["form_error"]).all_inner_texts()
        raise RuntimeError(f"submit refused: {errors} plan={plan.ops}") from exc
    return plan


# --------------------------------------------------------------------------- environment


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_env(var: Path) -> dict:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY")
    }
    env.update(
        {
            "CONCORD_VAR_DIR": str(var),
            "DATABASE_URL": f"sqlite:///{var / 'concord.sqlite3'}",
            "DEBUG": "0",
            "CONCORD_PRODUCTION": "0",
            "LOG_LEVEL": "WARNING",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
        }
    )
    return env


def manage(env, *args, capture=False) -> str:
    r = subprocess.run(
        [str(PY), "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        text=True,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return r.stdout or ""


def django_json(env, code: str):
    """Run ``code`` (which prints one line 'JSON:<json>') in manage.py shell; return the value."""
    out = manage(env, "shell", "-c", code, capture=True)
    for line in out.splitlines():
        if line.startswith("JSON:"):
            return json.loads(line[5:])
    raise RuntimeError(f"no JSON from shell: {out[-500:]}")


TRUTH_CODE = f"""
import json
from projects.models import Item
from projects.demo import demo_truth
from quality.demo import belief
from candidates.models import Candidate
items = Item.objects.filter(project__slug={PROJECT!r})
out = {{"items": {{}}, "without_candidates": []}}
for it in items:
    out["items"][it.pk] = {{"demo_truth": demo_truth(it.text), "belief": belief(it)}}
    if not Candidate.objects.filter(item=it, parse_error="").exists():
        out["without_candidates"].append(it.pk)
print("JSON:" + json.dumps(out))
"""

# --prefill: the demo project's one stage starts its form from the candidates (what a lead sets in
# the project settings' workflow JSON; validated by the same parser).
PREFILL_CODE = f"""
import json
from projects.models import Project
from projects.workflow import Workflow
p = Project.objects.get(slug={PROJECT!r})
stages = [{{"name": "annotate", "fields": p.get_schema().names, "annotators": p.annotators_per_item, "prefill": "{{mode}}"}}]
Workflow.from_data(stages, schema=p.get_schema())
p.workflow = stages
p.save(update_fields=["workflow"])
print("JSON:" + json.dumps(p.workflow))
"""

SUBMITTED_CODE = f"""
import json
from annotation.models import Annotation
rows = Annotation.objects.filter(item__project__slug={PROJECT!r}, annotator__username={ANNOTATOR!r},
                                 status="submitted", kind="annotation")
print("JSON:" + json.dumps({{a.item_id: {{"values": a.values, "time_spent_ms": a.time_spent_ms}} for a in rows}}))
"""

# For --axe: a second annotator disagrees on one item, so the reviewer has a task page to check.
DISAGREE_CODE = f"""
import json
from django.contrib.auth import get_user_model
from annotation.services import assignment_claim_next, content_warning_accept
from workflow.services import annotation_submit
from annotation.models import Annotation
from adjudication.models import AdjudicationTask
from projects.models import Project
project = Project.objects.get(slug={PROJECT!r})
user = get_user_model().objects.get(username="annotator2")
content_warning_accept(user=user, project=project)
task = None
for _ in range(5):
    claim = assignment_claim_next(annotator=user, project=project)
    a = claim.annotation
    if a is None:
        break
    first = Annotation.objects.filter(item=a.item, status="submitted").exclude(annotator=user).first()
    label = "harmful" if first is None or first.values.get("label") != "harmful" else "non-harmful"
    values = {{"label": label}}
    if label == "harmful":
        values.update(target_category="gender", target_entity="people", text_mention=None, visual_region=[])
    annotation_submit(annotator=user, item=a.item, values=values, version=a.version)
    task = AdjudicationTask.objects.filter(item=a.item).first()
    if task is not None:
        break
print("JSON:" + json.dumps({{"task": task.pk if task else None}}))
"""


# For --axe: an audit item of the demo auditor (the simulated project has a blind audit).
AUDIT_CODE = f"""
import json
from annotation.models import Annotation
a = Annotation.objects.filter(annotator__username="auditor", kind="audit",
                              item__project__slug={SIMULATED!r}).order_by("item_id").first()
print("JSON:" + json.dumps({{"item": a.item_id if a else None}}))
"""


class Server:
    def __init__(self, env, port):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [
                str(GUNICORN),
                "concord.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
                "--timeout",
                "60",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(self.url + "/accounts/login/", timeout=2).read()
                return
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise RuntimeError("gunicorn did not start")
                time.sleep(0.2)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --------------------------------------------------------------------------- the session


def login(act: Actions, page, base_url, username):
    page.goto(base_url + "/accounts/login/")  # typing the address is not counted
    act.click(SEL["login_user"], "login: focus username")
    act.type(username, "login: type username")
    act.press("Tab", "login: Tab to password")
    act.type(username + PASSWORD_SUFFIX, "login: type password")
    act.press("Enter", "login: Enter")
    page.wait_for_url(base_url + "/")


def run_session(browser, base_url, truths, args):

    viewport = {"width": args.viewport[0], "height": args.viewport[1]}
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    console_errors = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    act = Actions(page, viewport)
    item_end: dict[int, float] = {}
    items = []
    try:
        # Session setup (item 0): log in, open the project and "Annotate", accept the warning.
        login(act, page, base_url, ANNOTATOR)
        act.click(SEL["project_link"], "open project")
        page.wait_for_url(f"**/p/{PROJECT}/")
        act.click(SEL["annotate_link"], "open Annotate")
        page.wait_for_selector(SEL["accept_warning"])
        act.click(SEL["accept_warning"], "accept content warning")
        page.wait_for_selector(SEL["next"])
        item_end[0] = time.perf_counter()
        keys = args.strategy.startswith("keys")
        for n in range(1, args.items + 1):
            act.item = n
            t0 = time.perf_counter()
            # The first item starts with "Next item" on the queue page (Enter: the button has the
            # focus); then "Next item after submit" (on by default) opens each next one.
            if n == 1:
                if keys:
                    act.press("Enter", "next item (Enter)")
                else:
                    act.click(SEL["next"], "next item")
            page.wait_for_url(f"**/p/{PROJECT}/annotate/*/")
            page.wait_for_selector(SEL["ready"])
            item_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
            want = truths[str(item_id)][args.truth]
            use = args.strategy in ("keys", "best-candidate")
            if keys:
                plan = do_item_keys(act, page, want, use_candidates=use)
            else:
                plan = do_item(act, page, want, use_candidates=use)
            page.wait_for_selector(SEL["ready"] if n < args.items else "body")
            t1 = time.perf_counter()
            item_end[n] = t1
            mine = [a for a in act.log if a.item == n]
            items.append(
                {
                    "n": n,
                    "item_id": item_id,
                    "label": want["label"],
                    "actions": len(mine),
                    "scrolls": sum(a.kind == "scroll" for a in mine),
                    "planned": plan.cost + (1 if n == 1 else 0),
                    "base": plan.base,
                    "ops": [
                        op[0]
                        + (
                            f"({op[2]})"
                            if op[0]
                            in (
                                "use_field",
                                "radio",
                                "type_text",
                                "key_letter",
                                "key_digit",
                                "key_clear",
                                "key_type",
                                "nav",
                            )
                            else ""
                        )
                        + (f"x{op[1]}" if op[0] == "nav" else "")
                        for op in plan.ops
                        if not (op[0] == "nav" and op[1] == 0)
                    ],
                    "seconds": t1 - t0,
                }
            )
        act.close_timings(item_end)
    finally:
        context.close()
    return act, items, console_errors


# --------------------------------------------------------------------------- axe


AXE_PAGES = [
    # (label, user, path or callable on the page)
    ("annotation workspace", ANNOTATOR, "workspace"),
    ("annotation workspace, 'harmful' chosen", ANNOTATOR, "workspace-harmful"),
    ("audit workspace", "auditor", "audit"),
    ("reviewer: adjudication home", "reviewer", f"/p/{PROJECT}/review/"),
    ("reviewer: adjudication task", "reviewer", "task"),
    ("lead: quality dashboard", "lead", f"/p/{SIMULATED}/quality/"),
    ("lead: releases", "lead", f"/p/{SIMULATED}/releases/"),
]


def axe_install() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="concord-axe-"))
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--silent", "axe-core"],
        cwd=folder,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    path = folder / "node_modules" / "axe-core" / "axe.min.js"
    if not path.exists():
        raise RuntimeError("npm install axe-core gave no axe.min.js")
    return path


def run_axe(browser, base_url, env, viewport) -> dict:
    axe_js = axe_install()
    version = json.loads((axe_js.parent / "package.json").read_text())["version"]
    task = django_json(env, DISAGREE_CODE)["task"]
    audit_item = django_json(env, AUDIT_CODE)["item"]
    results = {}
    contexts = {}
    try:
        for label, user, path in AXE_PAGES:
            if user not in contexts:
                ctx = browser.new_context(viewport=viewport, bypass_csp=True)
                pg = ctx.new_page()
                pg.goto(base_url + "/accounts/login/")
                pg.fill(SEL["login_user"], user)
                pg.fill(SEL["login_password"], user + PASSWORD_SUFFIX)
                pg.press(SEL["login_password"], "Enter")
                pg.wait_for_url(base_url + "/")
                contexts[user] = (ctx, pg)
            pg = contexts[user][1]
            if path == "task":
                if task is None:
                    results[label] = {"error": "no adjudication task could be made"}
                    continue
                pg.goto(f"{base_url}/p/{PROJECT}/review/{task}/")
                pg.wait_for_selector("[data-ready='1']", timeout=10000)
            elif path == "audit":
                if audit_item is None:
                    results[label] = {"error": "no audit item for the demo auditor"}
                    continue
                pg.goto(f"{base_url}/p/{SIMULATED}/audit/{audit_item}/")
                if "/annotate/warning" in pg.url or "/warning" in pg.url:
                    pg.click(SEL["accept_warning"])
                pg.wait_for_selector(SEL["ready"])
            elif path == "workspace":
                pg.goto(f"{base_url}/p/{PROJECT}/annotate/")
                pg.click(SEL["next"])
                pg.wait_for_selector(SEL["ready"])
            elif path == "workspace-harmful":  # the same item, every field shown
                pg.check(SEL["radio"].format(field="label", value="harmful"))
                pg.wait_for_selector("#field-target_entity:not([hidden])")
            else:
                pg.goto(base_url + path)
                pg.wait_for_load_state("networkidle")
            pg.add_script_tag(path=str(axe_js))
            res = pg.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
            bad, where = Counter(), {}
            for v in res["violations"]:
                if v.get("impact") in ("serious", "critical"):
                    rule = f"{v['id']} ({v['impact']})"
                    bad[rule] += len(v["nodes"])
                    where[rule] = [" ".join(map(str, n["target"])) for n in v["nodes"][:3]]
            results[label] = {
                "url": pg.url.replace(base_url, ""),
                "serious_critical": dict(bad),
                "where": where,
                "other_violations": sorted(
                    v["id"] for v in res["violations"] if v.get("impact") not in ("serious", "critical")
                ),
            }
    finally:
        for ctx, _ in contexts.values():
            ctx.close()
        shutil.rmtree(axe_js.parents[2], ignore_errors=True)
    return {"axe_version": version, "pages": results}


# --------------------------------------------------------------------------- report


def git_head() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def check_submitted(env, items, truths, truth_key):
    rows = django_json(env, SUBMITTED_CODE)
    fields_meta = {"visual_region": "boxes"}
    ok, wrong = 0, []
    for it in items:
        got = (rows.get(str(it["item_id"])) or {}).get("values")
        want = truths[str(it["item_id"])][truth_key]
        good = got is not None and all(
            boxes_match(got.get(k) or [], v or [], BOX_TOLERANCE)
            if fields_meta.get(k) == "boxes"
            else (got.get(k) if got.get(k) != "" else None) == v
            for k, v in want.items()
        )
        if good:
            ok += 1
        else:
            wrong.append({"item_id": it["item_id"], "got": got, "want": want})
    return ok, wrong


def report(args, act, items, console_errors, check, setup_seconds, axe):
    per_item = [a for a in act.log if a.item > 0]
    setup = [a for a in act.log if a.item == 0]
    counts = [it["actions"] for it in items]
    secs = [it["seconds"] for it in items]
    kinds = Counter(a.kind for a in per_item)
    steps = Counter(a.step for a in per_item)
    step_secs = defaultdict(float)
    for a in per_item:
        step_secs[a.step] += a.seconds
    forced = Counter(a.step for a in per_item if a.kind != "key" and MOUSE_ONLY_TODAY.get(a.step, True))
    by_label = defaultdict(list)
    for it in items:
        by_label[it["label"]].append(it["actions"])
    ok, wrong = check
    n = len(items)

    print(
        f"\nannotate_actions: {PROJECT_NAME}, {ANNOTATOR}, strategy {args.strategy}, prefill {args.prefill}, truth {args.truth}, "
        f"UI at {git_head()}, viewport {args.viewport[0]}x{args.viewport[1]}"
    )
    print(f"  environment (migrate, collectstatic, load_demo, gunicorn): {setup_seconds:.1f} s")
    print(f"  items done:            {n} (submitted and matching the intended answer: {ok}/{n})")
    print(
        f"  total actions:         {len(per_item)}  (+ {len(setup)} once per session: log in, open project, "
        f"Annotate, content warning)"
    )
    print(f"  actions per item:      mean {statistics.mean(counts):.2f}, min {min(counts)}, max {max(counts)}")
    for label, cs in sorted(by_label.items()):
        print(f"      {label:<12} {len(cs):>2} items: mean {statistics.mean(cs):.2f}, min {min(cs)}, max {max(cs)}")
    print(
        f"  seconds per item:      mean {statistics.mean(secs):.3f}, median {statistics.median(secs):.3f} "
        f"(machine time, no human reading)"
    )
    print(
        f"  breakdown:             clicks {kinds['click']}, keys {kinds['key']}, drags {kinds['drag']}, "
        f"scrolls {kinds['scroll']}"
    )
    mouse = kinds["click"] + kinds["drag"] + kinds["scroll"]
    print(
        f"  mouse actions (clicks, drags, scrolls): {mouse} of {len(per_item)}; "
        f"with no keyboard way in this UI: {sum(forced.values())}"
    )
    print("  steps (count, share of the wall time):")
    total_secs = sum(step_secs.values()) or 1
    for step, c in steps.most_common():
        kind = next(a.kind for a in per_item if a.step == step)
        mark = (
            "mouse, no keyboard way"
            if MOUSE_ONLY_TODAY.get(step, True)
            else "keyboard"
            if kind == "key"
            else "mouse (a key exists)"
        )
        print(
            f"      {step:<34} {c:>4}   {step_secs[step]:7.2f} s  {100 * step_secs[step] / total_secs:5.1f}%  "
            f"{step_secs[step] / c * 1000:7.0f} ms each  [{mark}]"
        )
    bases = Counter("Use all" if it["base"] else "no candidate" for it in items)
    print(
        f"  plans: {dict(bases)}; counted = planned (+ scrolls) on every item: "
        f"{all(it['planned'] == it['actions'] - it['scrolls'] for it in items)}"
    )
    print("  per item (item id: actions = next item, [scroll,] plan):")
    for it in items:
        print(f"      #{it['item_id']:<3} {it['label']:<11} {it['actions']:>3}: " + ", ".join(it["ops"]))
    if wrong:
        print("  NOT matching the intended answer:")
        for w in wrong:
            print(f"      item {w['item_id']}: got {w['got']} want {w['want']}")
    if console_errors:
        print(f"  browser console errors: {console_errors[:5]}")
    if axe:
        print(f"\naxe-core {axe['axe_version']}: serious/critical violations (nodes) by rule id")
        for label, r in axe["pages"].items():
            if "error" in r:
                print(f"  {label}: {r['error']}")
                continue
            total = sum(r["serious_critical"].values())
            print(f"  {label} ({r['url']}): {total}")
            for rule, c in sorted(r["serious_critical"].items()):
                print(f"      {rule}: {c}   e.g. {'; '.join(r['where'][rule])}")
            if r["other_violations"]:
                print(f"      (minor/moderate rules: {', '.join(r['other_violations'])})")

    out = {
        "bench": "annotate_actions",
        "ui": git_head(),
        "project": PROJECT,
        "strategy": args.strategy,
        "prefill": args.prefill,
        "truth": args.truth,
        "viewport": list(args.viewport),
        "items": n,
        "correct": ok,
        "actions_total": len(per_item),
        "session_actions": len(setup),
        "actions_per_item": {"mean": round(statistics.mean(counts), 3), "min": min(counts), "max": max(counts)},
        "actions_per_item_by_label": {k: round(statistics.mean(v), 3) for k, v in sorted(by_label.items())},
        "seconds_per_item": {"mean": round(statistics.mean(secs), 3), "median": round(statistics.median(secs), 3)},
        "breakdown": {
            "clicks": kinds["click"],
            "keys": kinds["key"],
            "drags": kinds["drag"],
            "scrolls": kinds["scroll"],
        },
        "mouse_forced": sum(forced.values()),
        "mouse_actions": kinds["click"] + kinds["drag"] + kinds["scroll"],
        "steps": dict(steps.most_common()),
    }
    if axe:
        out["axe_serious_critical"] = {label: r.get("serious_critical") for label, r in axe["pages"].items()}
    print(json.dumps(out, sort_keys=False))
    return 0 if ok == n else 1


# --------------------------------------------------------------------------- main


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=20)
    p.add_argument("--port", type=int, default=0, help="default: a free port")
    p.add_argument("--strategy", choices=["keys", "keys-scratch", "best-candidate", "scratch"], default="keys")
    p.add_argument("--truth", choices=["demo_truth", "belief"], default="demo_truth")
    p.add_argument(
        "--viewport",
        type=lambda s: tuple(int(x) for x in s.split("x")),
        default=(1440, 1000),
        help="WIDTHxHEIGHT (scrolls depend on it)",
    )
    p.add_argument(
        "--prefill",
        choices=["none", "agreement"],
        default="none",
        help="the demo stage's prefill (projects.workflow): agreement starts the form from what most candidates agree on",
    )
    p.add_argument("--axe", action="store_true", help="also run axe-core on four pages")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    if not Path(CHROMIUM).exists():
        print(f"Chromium not found at {CHROMIUM}", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    var = Path(tempfile.mkdtemp(prefix="concord-actions-"))
    env = bench_env(var)
    server = None
    try:
        t0 = time.perf_counter()
        manage(env, "migrate", "--no-input", "-v", "0")
        manage(env, "collectstatic", "--no-input", "-v", "0")
        manage(env, "load_demo", "--quiet")
        if args.prefill != "none":
            django_json(env, PREFILL_CODE.replace("{mode}", args.prefill))
        info = django_json(env, TRUTH_CODE)
        truths = info["items"]
        if info["without_candidates"]:
            # load_demo generates the replay candidates inline; if it did not, that is a finding.
            print(f"warning: items without candidates: {info['without_candidates']}", file=sys.stderr)
        if args.items > len(truths):
            print(f"only {len(truths)} items in {PROJECT}", file=sys.stderr)
            return 2
        server = Server(env, args.port or free_port())
        setup_seconds = time.perf_counter() - t0
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                act, items, console_errors = run_session(browser, server.url, truths, args)
                check = check_submitted(env, items, truths, args.truth)
                axe = (
                    run_axe(browser, server.url, env, {"width": args.viewport[0], "height": args.viewport[1]})
                    if args.axe
                    else None
                )
            finally:
                browser.close()
        return report(args, act, items, console_errors, check, setup_seconds, axe)
    finally:
        if server is not None:
            server.stop()
        if args.keep:
            print(f"kept {var}", file=sys.stderr)
        else:
            shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
