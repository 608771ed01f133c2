"""Text normalization and SQuAD-style token metrics (SPEC section 3).

Used for the ``text_mention`` field (Meme3W "Metrics": F1_tok with tau_s = 0.7, mention EM in
Table 1) and, through :mod:`metrics.entity`, for target entities (F1_rel).

Normalization (``normalize``), applied in this order:

1. Unicode NFKC, so full-width forms (``ＷＯＭＥＮ``), ligatures and Arabic presentation forms
   compare equal to their plain forms.
2. ``str.casefold`` (stronger than ``lower``: ``"Straße"`` -> ``"strasse"``), followed by a
   second NFKC because case folding can emit sequences that NFKC would compose differently
   (the Unicode "NFKC_Casefold" closure); without it two strings could be equal only on the
   second pass.
3. Every character whose Unicode general category is punctuation (``P*``: Pc, Pd, Ps, Pe, Pi,
   Pf, Po) is *deleted*, not replaced by a space, exactly like the SQuAD v1.1 script deletes
   ``string.punctuation``: ``"don't"`` -> ``"dont"``, ``"U.S."`` -> ``"us"``. Consequence:
   ``"women/immigrants"`` becomes one token. Symbols (``S*``: ``$ + < = > ^ ` | ~``, emoji)
   are *not* punctuation in Unicode and are kept; that is the one place where we differ from
   SQuAD's ASCII rule.
4. The English articles ``a``, ``an``, ``the`` are dropped when they are whole tokens.
5. Whitespace (anything ``str.split()`` splits on) is collapsed to single spaces and the ends
   are stripped.

Not done, on purpose (the SPEC fixes the definition and outside scripts rely on it): no
stemming, no removal of format characters (zero-width space, ZWJ, bidi marks stay and do make
tokens differ), no Arabic-specific folding (harakat, tatweel and alef variants are kept as
they are; NFKC only folds presentation forms), digits are not unified across scripts.

Tokens (``tokens``): the whitespace tokens of ``normalize(s)``, except that every CJK
character is its own token (Chinese and Japanese do not separate words with spaces; per
character F1 is the usual relaxation, as in MLQA/CMRC). "CJK" here means Han ideographs (all
planes, compatibility ideographs, radicals, ``々〆〇``), Hiragana, Katakana and Hangul (syllables
and jamo: Korean does use spaces, but scoring syllables gives partial credit across attached
particles). Other scripts, Arabic included, use whitespace tokens.

Absence rule (all text metrics): ``None``, ``""``, whitespace-only strings and strings that
normalize to nothing (``"the"``, ``"!!!"``, ``"  a  "``) are all *absent*. Both absent -> 1.0,
exactly one absent -> 0.0. Any other type raises ``TypeError`` (records.py sanitizes model
output before calling these).
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

__all__ = [
    "ARTICLES",
    "normalize",
    "tokens",
    "token_f1",
    "exact_match",
    "token_f1_batch",
    "exact_match_batch",
    "is_absent",
]

ARTICLES: frozenset[str] = frozenset({"a", "an", "the"})

_ASCII_PUNCT_DELETE = str.maketrans(
    "", "", "".join(c for c in map(chr, range(128)) if unicodedata.category(c).startswith("P"))
)


@lru_cache(maxsize=1)
def _punctuation_delete_table() -> dict[int, None]:
    # Built lazily (about 0.2 s over all code points) so importing metrics stays cheap for
    # callers that never touch non-ASCII text. Uses the running Python's Unicode database.
    return {cp: None for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)).startswith("P")}


_CJK_CLASS = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf"  # CJK Radicals Supplement, Kangxi Radicals
    "\u3005-\u3007"  # ideographic iteration mark, closing mark, number zero
    "\u3021-\u3029\u3038-\u303b"  # Hangzhou numerals
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3130-\u318f"  # Hangul Compatibility Jamo
    "\u31f0-\u31ff"  # Katakana Phonetic Extensions
    "\u3400-\u4dbf"  # CJK Unified Ideographs Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\ua960-\ua97f"  # Hangul Jamo Extended-A
    "\uac00-\ud7ff"  # Hangul Syllables, Hangul Jamo Extended-B
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\U00020000-\U0003ffff"  # Extensions B-H and Compatibility Supplement (planes 2-3)
)
_CJK_RE = re.compile(f"([{_CJK_CLASS}])")


def _check_text(s: object) -> None:
    if s is not None and not isinstance(s, str):
        raise TypeError(f"expected str or None, got {type(s).__name__}")


def _normalized_words(s: str) -> list[str]:
    """Whitespace tokens of the normalized form, articles removed."""
    if s.isascii():
        # NFKC is the identity on ASCII and casefold equals lower there; this path is ~5x
        # faster and covers most English meme text.
        s = s.lower().translate(_ASCII_PUNCT_DELETE)
    else:
        s = unicodedata.normalize("NFKC", s).casefold()
        s = unicodedata.normalize("NFKC", s).translate(_punctuation_delete_table())
    return [w for w in s.split() if w not in ARTICLES]


def _split_cjk(words: list[str]) -> list[str]:
    out: list[str] = []
    for w in words:
        if w.isascii() or _CJK_RE.search(w) is None:
            out.append(w)
        else:
            out.extend(p for p in _CJK_RE.split(w) if p)
    return out


def normalize(s: str | None) -> str:
    """Normalized form of ``s`` (NFKC, casefold, no punctuation, no articles, single spaces).

    See the module docstring for the exact steps. ``None`` normalizes to ``""``; a result of
    ``""`` means the value is absent for every metric in this package.
    """
    _check_text(s)
    if s is None:
        return ""
    return " ".join(_normalized_words(s))


def tokens(s: str | None) -> list[str]:
    """Whitespace tokens of ``normalize(s)``, with every CJK character its own token.

    ``tokens(None) == []``. Article removal happens on whitespace tokens *before* the CJK
    split, so in ``"a中国"`` the ``a`` survives (it was not a whole token).
    """
    _check_text(s)
    if s is None:
        return []
    return _split_cjk(_normalized_words(s))


def is_absent(s: str | None) -> bool:
    """True when ``s`` counts as absent for text metrics (None, blank, or normalizes to "")."""
    return not tokens(s)


def _overlap(ta: list[str], tb: list[str]) -> int:
    # Size of the multiset intersection. A dict loop beats Counter(ta) & Counter(tb) by ~3x
    # on the 1-10 token strings that mentions and entities are.
    counts: dict[str, int] = {}
    for t in tb:
        counts[t] = counts.get(t, 0) + 1
    same = 0
    for t in ta:
        c = counts.get(t, 0)
        if c:
            counts[t] = c - 1
            same += 1
    return same


def _f1_from_tokens(ta: list[str], tb: list[str]) -> float:
    if not ta or not tb:
        return 1.0 if not ta and not tb else 0.0
    same = _overlap(ta, tb)
    if same == 0:
        return 0.0
    # 2PR/(P+R) with P = same/|a|, R = same/|b| equals 2*same/(|a|+|b|); this form has one
    # rounding and is exactly symmetric in a and b (2*p*r/(p+r) is not, bit for bit).
    return 2.0 * same / (len(ta) + len(tb))


def token_f1(a: str | None, b: str | None) -> float:
    """SQuAD-style token F1 between ``a`` and ``b`` over token multisets (SPEC section 3).

    Definition: with ``A = tokens(a)``, ``B = tokens(b)`` and ``c`` the size of their multiset
    intersection, ``F1 = 2c / (|A| + |B|)`` (= 2PR/(P+R) of the SQuAD v1.1 script), 0 when
    ``c == 0``. Symmetric, in [0, 1], 1 for identical token multisets (so word order does not
    matter: ``"black women"`` vs ``"women black"`` is 1.0).

    Absence: both absent (None / "" / whitespace / normalizes to nothing) -> 1.0; exactly one
    absent -> 0.0. (SQuAD would give 0 when both are empty; the SPEC's rule makes "both say
    there is no mention" agreement.)

    Source: Meme3W "Metrics" (F1_tok for the textual mention, tau_s = 0.7) and Stage 2
    agreement ("token-F1 of 0.824 for textual mention").
    """
    return _f1_from_tokens(tokens(a), tokens(b))


def exact_match(a: str | None, b: str | None) -> float:
    """1.0 if ``normalize(a) == normalize(b)`` else 0.0 (same absence rule as ``token_f1``).

    Compares normalized *strings*, so token order and spacing between CJK characters matter
    here (``"中国"`` vs ``"中 国"`` is 0.0 while their token F1 is 1.0). Both absent -> 1.0,
    one absent -> 0.0 (falls out of comparing ``""``).

    Source: Meme3W Table 1, "Text Mention EM" and category EM.
    """
    return 1.0 if normalize(a) == normalize(b) else 0.0


def _check_pairs(a: Sequence[object], b: Sequence[object]) -> None:
    if len(a) != len(b):
        raise ValueError(f"sequences differ in length: {len(a)} != {len(b)}")


def token_f1_batch(a: Sequence[str | None], b: Sequence[str | None]) -> np.ndarray:
    """``token_f1`` over paired sequences -> float64 array; identical results to the scalar.

    Tokenization is memoized per distinct string within the call (annotators copy the same
    spans and the same candidate values, so distinct strings are far fewer than pairs), and
    byte-identical pairs short-cut to 1.0 (identical strings have identical tokens, and two
    absent values score 1.0 as well). Raises ``ValueError`` on unequal lengths and
    ``TypeError`` on non-string values.
    """
    _check_pairs(a, b)
    cache: dict[str, list[str]] = {}

    def toks(s: str | None) -> list[str]:
        if s is None:
            return []
        t = cache.get(s)
        if t is None:
            _check_text(s)
            t = cache[s] = _split_cjk(_normalized_words(s))
        return t

    out: list[float] = []
    append = out.append
    for x, y in zip(a, b):
        if x is y or (x == y and isinstance(x, str)):
            _check_text(x)
            append(1.0)
        else:
            append(_f1_from_tokens(toks(x), toks(y)))
    return np.fromiter(out, dtype=np.float64, count=len(out))


def exact_match_batch(a: Sequence[str | None], b: Sequence[str | None]) -> np.ndarray:
    """``exact_match`` over paired sequences -> float64 array of 0.0/1.0 (memoized)."""
    _check_pairs(a, b)
    cache: dict[str, str] = {}

    def norm(s: str | None) -> str:
        if s is None:
            return ""
        n = cache.get(s)
        if n is None:
            _check_text(s)
            n = cache[s] = " ".join(_normalized_words(s))
        return n

    out = [1.0 if (x is y and (x is None or isinstance(x, str))) or norm(x) == norm(y) else 0.0 for x, y in zip(a, b)]
    return np.fromiter(out, dtype=np.float64, count=len(out))
