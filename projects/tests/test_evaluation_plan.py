"""Every field type declares its evaluation metric through the registry, and the presets'
plans are what metrics.evaluation scores (no per-preset branch anywhere else)."""

from __future__ import annotations

import pytest

from metrics import evaluation as ev
from metrics.tests.test_evaluation import MEME3W_PLAN
from projects.evaluation import evaluation_plan
from projects.fieldtypes import REGISTRY
from projects.presets import PRESETS
from projects.tests.test_registry import SAMPLES


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_each_type_declares_its_evaluation(name) -> None:
    ftype = REGISTRY[name]
    assert "evaluation_kind" in type(ftype).__dict__, f"{name}: declare evaluation_kind (None if there is no metric)"
    spec = SAMPLES[name][0]
    entry = ftype.evaluation(spec)
    if ftype.evaluation_kind is None:
        assert entry is None
        return
    assert entry["kind"] in ev._CLEAN
    golds = [{"item_id": 1, "gold": {spec["name"]: SAMPLES[name][1]}}]
    scored = ev.score({"fields": [entry]}, golds, [{spec["name"]: SAMPLES[name][1]}])
    assert scored.figures and all(f.value() == pytest.approx(1.0) for f in scored.figures if f.n)


def test_meme3w_plan_is_the_paper_table() -> None:
    plan = evaluation_plan(schema=PRESETS["meme3w"]["schema"], preset="meme3w", release={"project": "p", "version": 1})
    strip = [{k: f.get(k) for k in ("name", "kind", "choices", "positive", "subset")} for f in plan["fields"]]
    want = [{k: f.get(k) for k in ("name", "kind", "choices", "positive", "subset")} for f in MEME3W_PLAN["fields"]]
    assert strip == want
    assert plan["composites"][0]["fields"] == MEME3W_PLAN["composites"][0]["fields"]
    assert plan["primary"] == "jra" and plan["release"] == {"project": "p", "version": 1}
    golds = [{"item_id": 1, "gold": {"label": "non-harmful"}}]
    names = [f.name for f in ev.score(plan, golds, [{"label": "non-harmful"}]).figures]
    assert names[: len(plan["order"])] == plan["order"]


def test_aha_and_memecap_plans() -> None:
    aha = evaluation_plan(schema=PRESETS["aha"]["schema"], preset="aha")
    assert aha["fields"][0]["positive"] == "Hateful"
    assert aha["fields"][1]["subset"] == {"field": "is_hateful", "in": ["Hateful"]}
    cap = evaluation_plan(
        schema=PRESETS["memecap"]["schema"], preset="memecap", reference_fields=["image_caption", "meme_caption"]
    )
    by = {f["name"]: f for f in cap["fields"]}
    assert by["meme_caption"]["references"] and by["meme_caption"]["kind"] == "text"
    assert cap["primary"] == "meme_caption.bleu4"


def test_custom_schema_without_the_preset_fields_has_no_composite() -> None:
    schema = {"version": 1, "fields": [{"name": "label", "type": "choice", "choices": ["a", "b"]}]}
    plan = evaluation_plan(schema=schema, preset="meme3w")
    assert plan["composites"] == [] and plan["primary"] is None
    assert plan["breakdowns"] == ["source_dataset", "language"]
