from __future__ import annotations

import pytest

from exports.factories import gold_create


@pytest.fixture
def gold_items(project, items, annotator_a, annotator_b):
    """The four ``items``, each with an identical-annotation gold record."""
    gold_create(project, items, [annotator_a, annotator_b])
    return items


@pytest.fixture
def dup_items(project, tmp_path):
    """Twelve items: s1 a recompressed copy of s0 (same meme, same pHash), s3 the exact pixels of s2 in PNG,
    s5 a resized copy of s4's picture (2 bits apart) with another caption (a template: different), six singletons."""
    from exports.factories import as_png, items_import, recompressed
    from projects.factories import image_bytes

    base = [image_bytes(i) for i in range(9)]
    rows = [
        {"source_id": "s0", "data": base[0], "text": "Zorg meme zero", "redistributable": True},
        {"source_id": "s1", "data": recompressed(base[0]), "text": "Zorg meme zero"},
        {"source_id": "s2", "data": base[1], "text": "Plain meme two", "redistributable": True},
        {"source_id": "s3", "data": as_png(base[1]), "text": "Plain meme two (repost)", "ext": "png"},
        {"source_id": "s4", "data": base[2], "text": "Template with caption A"},
        {"source_id": "s5", "data": recompressed(base[2], scale=0.6), "text": "Template, caption B about Zorg"},
    ]
    rows += [
        {"source_id": f"s{i}", "data": base[i - 3], "text": f"Singleton {i}" + (" Zorg" if i % 2 else "")}
        for i in range(6, 12)
    ]
    return items_import(project, tmp_path / "dups", rows)


@pytest.fixture
def dup_gold(project, dup_items, annotator_a, annotator_b):
    gold_create(project, dup_items, [annotator_a, annotator_b])
    return dup_items
