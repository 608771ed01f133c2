"""Shared hypothesis settings and strategies for the metrics tests.

Text is built from explicit character lists with ``sampled_from`` rather than ``st.text``, and
the example database is off (``database=None``), so the runs write as little as possible into
``./.hypothesis`` (Hypothesis still keeps its small, gitignored ``constants`` cache there).
Example counts are kept low enough for the whole metrics suite to run in well under a minute
on two cores.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# METRICS_HYPOTHESIS_EXAMPLES=2000 pytest metrics/tests  -- a thorough run before a release.
_EXAMPLES = int(os.environ.get("METRICS_HYPOTHESIS_EXAMPLES", "60"))
FAST = settings(
    max_examples=_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
SLOW = settings(FAST, max_examples=max(10, _EXAMPLES * 5 // 12))


def text_from(chars: str | list[str], max_size: int = 30) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(list(chars)), max_size=max_size).map("".join)


# Mixed-script alphabet: ASCII letters, articles' letters, spaces, ASCII and Unicode
# punctuation, full-width forms, CJK, Arabic (with a presentation form), combining marks.
MIXED_CHARS = list("abtheAN THE  .,!'-") + [
    "\u3000",
    "\u00a0",
    "\t",
    "\u2019",
    "\u201c",
    "\u2014",
    "\u00bf",  # spaces, quotes, dashes
    "\uff37",
    "\uff4f",
    "\uff01",  # full-width W, o, !
    "中",
    "国",
    "人",
    "の",
    "カ",
    "한",
    "م",
    "س",
    "ل",
    "\u060c",
    "\u061f",
    "\ufefb",
    "\u064f",  # Arabic, comma, ?, lam-alef, damma
    "e\u0301",
    "\u00e9",
    "ß",
    "ﬁ",
]

mixed_text = text_from(MIXED_CHARS)
optional_mixed_text = st.one_of(st.none(), mixed_text)

# ASCII text on which our normalization and SQuAD v1.1's coincide: letters, digits, ASCII
# whitespace and exactly the ASCII characters that are both in string.punctuation and Unicode
# category P (the S-category ones, $+<=>^`|~, are kept by us and deleted by SQuAD).
_WORDS = [
    "a",
    "an",
    "the",
    "The",
    "A",
    "women",
    "Women",
    "muslim",
    "people",
    "Black",
    "immigrants",
    "x",
    "y1",
    "2",
    "dont",
    "the1",
    "anna",
    "theory",
    "AN",
]
_P_ASCII = list("!\"#%&'()*,-./:;?@[\\]_{}")


@st.composite
def squad_ascii_text(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 7))):
        word = draw(st.sampled_from(_WORDS))
        if draw(st.booleans()):
            word = draw(st.sampled_from(_P_ASCII)) + word
        if draw(st.booleans()):
            word = word + draw(st.sampled_from(_P_ASCII))
        parts.append(word)
        parts.append(draw(st.sampled_from([" ", "  ", "\t", "\n", " - ", "/"])))
    return "".join(parts)


coord = st.integers(0, 1000)


@st.composite
def int_box(draw: st.DrawFn, max_side: int = 400) -> list[int]:
    x1 = draw(st.integers(0, 990))
    y1 = draw(st.integers(0, 990))
    return [
        x1,
        y1,
        draw(st.integers(x1 + 1, min(1000, x1 + max_side))),
        draw(st.integers(y1 + 1, min(1000, y1 + max_side))),
    ]


@st.composite
def grid_box(draw: st.DrawFn) -> list[int]:
    """Boxes on a coarse grid, so that equal IoUs and tied assignments are common."""
    x1 = draw(st.integers(0, 3))
    y1 = draw(st.integers(0, 3))
    return [x1, y1, draw(st.integers(x1 + 1, 4)), draw(st.integers(y1 + 1, 4))]


@st.composite
def float_box(draw: st.DrawFn) -> list[float]:
    f = st.floats(0, 1000, allow_nan=False, allow_infinity=False)
    x1, x2 = sorted((draw(f), draw(f)))
    y1, y2 = sorted((draw(f), draw(f)))
    if x2 - x1 < 1e-3 or y2 - y1 < 1e-3:
        x2, y2 = x1 + 1.0, y1 + 1.0
    return [x1, y1, x2, y2]


def region(box: st.SearchStrategy[list], max_size: int = 4) -> st.SearchStrategy[list]:
    return st.lists(box, min_size=0, max_size=max_size)
