"""Automated checks on a VIKR conversion (MemeBench section 2, quality control: "automated
schema and entity-link validation"; section 3: the Visual layer names no entity).

Pure functions over plain data (a parsed reply): every problem becomes a flag for the QC
reviewer, nothing is repaired here. A flag is ``{"check", "field", "item", "message"}``.

Checks:

- ``schema``: each layer is a list of objects with an id and a text; ids are unique;
- ``count``: each layer holds 1 to 4 items (MemeBench: "Each VIKR layer yields 1-4 binary
  checklist items");
- ``link``: every Identity item links to a Visual item that exists;
- ``entity_in_visual``: no Visual text contains an entity named in the Identity layer
  (compared case-, width- and diacritics-insensitively; Latin names as whole words, CJK names
  as substrings, since Chinese and Japanese text has no spaces between words).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

LAYERS = (("V", "visual"), ("I", "identity"), ("K", "knowledge"), ("R", "reasoning"))
MIN_ITEMS, MAX_ITEMS = 1, 4
#: Quoted or bracketed names in an Identity text (used when the reply lists no "entities").
_QUOTED = re.compile(r"[\"“「『《«‹']([^\"”」』》»›']{2,60})[\"”」』》»›']")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
#: A name written in Latin script must hold at least this many letters to be searched for
#: (a one-letter "L" would match everywhere); CJK names at least two characters.
MIN_LATIN, MIN_CJK = 3, 2


def fold(text: str) -> str:
    """Case-, width- and diacritics-insensitive form: "Kēnán" and "KENAN" compare equal, and
    full-width Ｃｏｎａｎ equals Conan (NFKC then NFKD without combining marks)."""
    text = unicodedata.normalize("NFKC", text or "").casefold()
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", text)


def _flag(check: str, field: str, message: str, item: str | None = None) -> dict:
    return {"check": check, "field": field, "item": item, "message": message}


def mentions(text: str, name: str) -> bool:
    """Whether ``text`` mentions ``name`` (see the module docstring for the matching rules)."""
    t, n = fold(text), fold(name).strip()
    if not n:
        return False
    if _CJK.search(n):
        return len(n) >= MIN_CJK and n in t
    if sum(c.isalnum() for c in n) < MIN_LATIN:
        return False
    # Whole words: "Ann" is not found in "announcement"; a CJK neighbour counts as a boundary.
    start = t.find(n)
    while start >= 0:
        before = t[start - 1] if start else " "
        after = t[start + len(n)] if start + len(n) < len(t) else " "
        if not _letter(before) and not _letter(after):
            return True
        start = t.find(n, start + 1)
    return False


def _letter(c: str) -> bool:
    return c.isalnum() and not _CJK.match(c)


def entity_names(identity: list, entities: Any) -> dict[str, list[str]]:
    """{identity item id (or ""): names} from the reply's ``entities`` list ({id, names, work})
    and, for items it does not cover, the quoted or bracketed names in the item text."""
    out: dict[str, list[str]] = {}
    if isinstance(entities, list):
        for entry in entities:
            if not isinstance(entry, dict):
                continue
            names = entry.get("names")
            names = [names] if isinstance(names, str) else names if isinstance(names, list) else []
            names = [n for n in names if isinstance(n, str)]
            if isinstance(entry.get("name"), str):
                names.append(entry["name"])
            if isinstance(entry.get("work"), str):
                names.append(entry["work"])
            key = str(entry.get("id") or "")
            out.setdefault(key, []).extend(n.strip() for n in names if n.strip())
    for entry in identity if isinstance(identity, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("text"), str):
            continue
        key = str(entry.get("id") or "")
        if key not in out:
            out[key] = [m.strip() for m in _QUOTED.findall(entry["text"]) if m.strip()]
    return out


def vikr_checks(reply: dict, *, fields: dict[str, str] | None = None) -> list[dict]:
    """Flags of one parsed conversion reply (a dict with the four layers, maybe ``entities``).

    ``fields`` maps the layer letters to the schema's field names (default: the VIKR names).
    """
    names = dict(fields or dict(LAYERS))
    flags: list[dict] = []
    layers: dict[str, list[dict]] = {}
    for letter, _ in LAYERS:
        field = names[letter]
        value = reply.get(field)
        if value is None:
            flags.append(_flag("schema", field, f"{field}: missing from the reply"))
            layers[letter] = []
            continue
        if not isinstance(value, list):
            flags.append(_flag("schema", field, f"{field}: not a list of items"))
            layers[letter] = []
            continue
        items, seen = [], set()
        for n, entry in enumerate(value, start=1):
            if isinstance(entry, str):
                entry = {"text": entry}
            if not isinstance(entry, dict) or not isinstance(entry.get("text"), str) or not entry["text"].strip():
                flags.append(_flag("schema", field, f"{field}: item {n} has no text"))
                continue
            ident = entry.get("id")
            if ident in (None, ""):
                flags.append(_flag("schema", field, f"{field}: item {n} has no id"))
            elif str(ident) in seen:
                flags.append(_flag("schema", field, f"{field}: id {ident} appears twice", str(ident)))
            else:
                seen.add(str(ident))
            items.append(entry)
        if not MIN_ITEMS <= len(value) <= MAX_ITEMS:
            flags.append(
                _flag("count", field, f"{field}: {len(value)} items; a layer holds {MIN_ITEMS} to {MAX_ITEMS}")
            )
        layers[letter] = items
    visual_ids = {str(e.get("id")) for e in layers["V"] if e.get("id") not in (None, "")}
    for entry in layers["I"]:
        ident, link = str(entry.get("id") or "?"), entry.get("link")
        if link in (None, ""):
            flags.append(_flag("link", names["I"], f"{ident}: names no Visual item (link missing)", ident))
        elif str(link) not in visual_ids:
            flags.append(_flag("link", names["I"], f"{ident}: links to {link}, which is not a Visual item", ident))
    found = entity_names(layers["I"], reply.get("entities"))
    for entry in layers["V"]:
        ident = str(entry.get("id") or "?")
        hits = sorted({n for group in found.values() for n in group if mentions(entry["text"], n)}, key=str.casefold)
        if hits:
            flags.append(
                _flag(
                    "entity_in_visual",
                    names["V"],
                    f"{ident} names {', '.join(hits)}: the Visual layer describes appearance without names",
                    ident,
                )
            )
    return flags
