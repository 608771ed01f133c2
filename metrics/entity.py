"""Target-entity canonicalization and F1_rel (Meme3W Appendix A.2, Table 8; SPEC section 3).

The paper: "We normalize casing, punctuation, and whitespace, and map referentially equivalent
spelling, plurality, abbreviation, and referring-expression variants to a shared canonical
form. Broader groups and their subgroups, as well as modifiers that alter the target identity,
remain distinct. [...] The canonicalized mentions are subsequently compared using F1_rel. For
JRA, the target-entity field is considered correct when F1_rel >= 0.7."

Decisions:

* The lexicon maps *whole* normalized entity strings (variant -> canonical). It is not applied
  to sub-phrases: ``"young Muslims"`` is not rewritten by a ``Muslims -> Muslim people``
  entry. Sub-phrase rewriting can merge a group with its subgroup or duplicate tokens
  (``chinese -> chinese people`` would turn ``"chinese people"`` into
  ``"chinese people people"``), which the paper forbids; leads add an entry per full variant.
* One lookup, no chains: ``a -> b`` and ``b -> c`` does not send ``a`` to ``c``.
  :class:`Lexicon` rejects such chains (and conflicting duplicates) when it is built, so a
  frozen project lexicon is always idempotent: ``canonicalize(canonicalize(x)) ==
  canonicalize(x)``.
* Keys and values are normalized with :func:`metrics.text.normalize`, so ``"Muslims"``,
  ``"MUSLIMS"`` and ``"muslims."`` are the same key. A key or value that normalizes to
  nothing is rejected (it would make a present entity absent).
* Distinct pairs stay distinct through token overlap, not through the lexicon: the Table 8
  "No" pairs score below tau_e = 0.7 (``immigrants``/``refugees`` 0.0, ``Asian people``/
  ``Chinese people`` 0.5, ``Black women``/``women`` 0.667).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache

import numpy as np

from metrics.text import _f1_from_tokens, _split_cjk, normalize

__all__ = [
    "Lexicon",
    "TABLE8_PAIRS",
    "TABLE8_LEXICON",
    "canonicalize",
    "f1_rel",
    "f1_rel_batch",
]

#: Meme3W Table 8, verbatim: (entity A, entity B, same canonical form?).
TABLE8_PAIRS: tuple[tuple[str, str, bool], ...] = (
    ("women", "woman", True),
    ("Muslim people", "Muslims", True),
    ("Jewish people", "Jews", True),
    ("LGBTQ people", "LGBTQ community", True),
    ("immigrants", "refugees", False),
    ("Asian people", "Chinese people", False),
    ("Black women", "women", False),
)

#: Seed lexicon (variant -> canonical) from the Table 8 "Yes" pairs; the first column is the
#: canonical form. Meant to seed a project's lexicon, which leads then extend and version.
TABLE8_LEXICON: dict[str, str] = {b: a for a, b, same in TABLE8_PAIRS if same}


class Lexicon(Mapping[str, str]):
    """Immutable, normalized variant -> canonical mapping.

    Build once per project version and pass it to :func:`canonicalize` / :func:`f1_rel`;
    a plain dict works too (it is converted, and the conversion of the last few distinct
    dicts is cached by content). Raises ``ValueError``
    on: a key or value that normalizes to ``""``; two variants that normalize to the same key
    but different canonicals; a chain (a canonical that is itself a variant of another
    canonical). ``to_dict()`` gives the normalized form to freeze into an export.
    """

    __slots__ = ("_map",)

    def __init__(self, mapping: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        items = mapping.items() if isinstance(mapping, Mapping) else mapping
        normalized: dict[str, str] = {}
        for variant, canonical in items:
            key, value = normalize(variant), normalize(canonical)
            if not key or not value:
                raise ValueError(f"lexicon entry {variant!r} -> {canonical!r} normalizes to empty")
            previous = normalized.get(key)
            if previous is not None and previous != value:
                raise ValueError(f"lexicon variant {variant!r} maps to both {previous!r} and {value!r}")
            normalized[key] = value
        for key, value in normalized.items():
            target = normalized.get(value)
            if target is not None and target != value:
                raise ValueError(f"lexicon chain {key!r} -> {value!r} -> {target!r}: map variants to the final form")
        self._map = normalized

    def __getitem__(self, key: str) -> str:
        return self._map[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __repr__(self) -> str:
        return f"Lexicon({self._map!r})"

    def to_dict(self) -> dict[str, str]:
        return dict(self._map)


@lru_cache(maxsize=16)
def _lexicon_from_items(items: tuple[tuple[str, str], ...]) -> Lexicon:
    return Lexicon(items)


def _as_lexicon(lexicon: Mapping[str, str] | None) -> Mapping[str, str]:
    if lexicon is None:
        return {}
    if isinstance(lexicon, Lexicon):
        return lexicon
    # Services call f1_rel per pair with the project's plain dict. Building a Lexicon
    # normalizes every entry (~1 us each); keying a small cache on the items tuple costs a
    # few ns per entry, so repeated calls with an unchanged dict are cheap. The key is a
    # snapshot of the contents, so a dict edited in place is never served stale.
    try:
        return _lexicon_from_items(tuple(lexicon.items()))
    except TypeError:  # unhashable values: build directly (and let Lexicon report them)
        return Lexicon(lexicon)


def canonicalize(s: str | None, lexicon: Mapping[str, str] | None = None) -> str | None:
    """Canonical form of an entity: ``normalize(s)``, then one whole-string lexicon lookup.

    Returns ``None`` when ``s`` is absent (None, blank, or normalizes to ``""``), else the
    normalized canonical string; strings without a lexicon entry are returned normalized.
    ``lexicon`` is variant -> canonical (a :class:`Lexicon` or a plain mapping, normalized on
    use). With ``TABLE8_LEXICON``, ``"woman"`` -> ``"women"`` and ``"Muslims"`` ->
    ``"muslim people"``. Source: Meme3W Appendix A.2 "Entity canonicalization", Table 8.
    """
    n = normalize(s)
    if not n:
        return None
    return _as_lexicon(lexicon).get(n, n)


def f1_rel(a: str | None, b: str | None, lexicon: Mapping[str, str] | None = None) -> float:
    """F1_rel: ``token_f1`` of the canonical forms of two entities (Meme3W "Metrics", A.2).

    Absence follows ``token_f1``: both absent -> 1.0, one absent -> 0.0. Used with tau_e = 0.7
    in JRA (Eq. 13) and for the pre-adjudication entity agreement (mean and share >= 0.7).
    """
    lex = _as_lexicon(lexicon)
    return _f1_from_tokens(_canonical_tokens(a, lex), _canonical_tokens(b, lex))


def _canonical_tokens(s: str | None, lex: Mapping[str, str]) -> list[str]:
    c = canonicalize(s, lex)
    return [] if c is None else _split_cjk(c.split(" "))


def f1_rel_batch(
    a: Sequence[str | None], b: Sequence[str | None], lexicon: Mapping[str, str] | None = None
) -> np.ndarray:
    """``f1_rel`` over paired sequences -> float64 array; identical results to the scalar.

    The lexicon is normalized once and canonical tokens are memoized per distinct string
    (entities come from a small working vocabulary), which is what makes 1M pairs cheap.
    """
    if len(a) != len(b):
        raise ValueError(f"sequences differ in length: {len(a)} != {len(b)}")
    lex = _as_lexicon(lexicon)
    cache: dict[str, list[str]] = {}

    def toks(s: str | None) -> list[str]:
        if s is None:
            return []
        t = cache.get(s)
        if t is None:
            t = cache[s] = _canonical_tokens(s, lex)
        return t

    out: list[float] = []
    append = out.append
    for x, y in zip(a, b):
        if x is y or (x == y and isinstance(x, str)):
            toks(x)  # type check (raises TypeError) and warm the cache
            append(1.0)
        else:
            append(_f1_from_tokens(toks(x), toks(y)))
    return np.fromiter(out, dtype=np.float64, count=len(out))
