"""The two-judge VIKR rule of the shipped scorer (metrics.evaluation, a ``checklist_judges``
plan) on hand-made cases, and against metrics.checklist (the same rules over booleans)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from metrics import evaluation as ev
from metrics.checklist import vikr_scores

PLAN = {
    "format": ev.PLAN_FORMAT,
    "version": ev.PLAN_VERSION,
    "kind": ev.CHECKLIST_JUDGES,
    "layers": [["V", "visual"], ["I", "identity"], ["K", "knowledge"], ["R", "reasoning"]],
    "judges": 2,
    "fields": [
        {"name": "explanation", "kind": "explanation"},
        {"name": "judgements", "kind": "judgements", "judges": 2},
    ],
    "order": ["V", "I", "K", "R", "success", "success_3of4"],
    "primary": "success",
    "breakdowns": ["gold.language"],
}


def gold(item_id, *, v=("V1", "V2"), i=("I1",), k=("K1",), r=("R1",), language="English", references=False):
    def cl(ids):
        value = [{"id": x, "text": f"req {x}"} for x in ids]
        return [value] if references else value

    g = {"visual": cl(v), "identity": cl(i), "knowledge": cl(k), "reasoning": cl(r)}
    g["language"] = [language] if references else language
    return {"item_id": item_id, "split": "test", "gold": g}


ALL = {"V1": "pass", "V2": "pass", "I1": "pass", "K1": "pass", "R1": "pass"}


def line(judge1, judge2):
    return {"explanation": "an explanation", "judgements": [judge1, judge2]}


def values(scored, name):
    fig = scored.by_name()[name]
    return fig.values[fig.mask].tolist()


def test_one_judge_fails_an_item_so_the_item_layer_and_success_fail() -> None:
    golds = [gold(1)]
    scored = ev.score(PLAN, golds, [line(ALL, {**ALL, "V2": "fail"})])
    figs = scored.by_name()
    assert [figs[x].value() for x in ("V", "I", "K", "R")] == [0.0, 1.0, 1.0, 1.0]
    assert figs["success"].value() == 0.0
    assert figs["success_3of4"].value() == 1.0  # three of four layers still pass
    # each judge alone: judge 1 passes everything, judge 2 fails V
    assert figs["judge1.success"].value() == 1.0 and figs["judge1.V"].value() == 1.0
    assert figs["judge2.success"].value() == 0.0 and figs["judge2.V"].value() == 0.0


def test_both_judges_pass_everything_success_is_one() -> None:
    scored = ev.score(PLAN, [gold(1)], [line(ALL, dict(ALL))])
    assert all(scored.by_name()[x].value() == 1.0 for x in ("V", "I", "K", "R", "success", "success_3of4"))


def test_three_of_four_variant() -> None:
    golds = [gold(n) for n in range(4)]
    preds = [
        line(ALL, ALL),  # 4 layers -> success 1, 3of4 1
        line({**ALL, "K1": "fail"}, ALL),  # 3 layers -> 0, 1
        line({**ALL, "K1": "fail"}, {**ALL, "R1": "fail"}),  # K and R fail: 2 layers -> 0, 0
        line({**ALL, "V1": "fail", "I1": "fail"}, ALL),  # 2 layers -> 0, 0
    ]
    scored = ev.score(PLAN, golds, preds)
    assert values(scored, "success") == [1, 0, 0, 0]
    assert values(scored, "success_3of4") == [1, 1, 0, 0]
    assert values(scored, "K") == [1, 0, 0, 1] and values(scored, "R") == [1, 1, 0, 1]


def test_no_decision_missing_line_and_malformed_judgements_fail() -> None:
    golds = [gold(n) for n in range(5)]
    no_v2 = {k: v for k, v in ALL.items() if k != "V2"}
    preds = [
        line(ALL, {**ALL, "V2": None}),  # undecided -> fail
        line(ALL, no_v2),  # left out -> fail
        None,  # no line: every layer fails
        {"explanation": "x", "judgements": "all pass"},  # malformed: every layer fails
        {"explanation": "x", "judgements": [ALL]},  # the second judge is absent -> fails
    ]
    scored = ev.score(PLAN, golds, preds)
    assert values(scored, "V") == [0, 0, 0, 0, 0]
    assert values(scored, "I") == [1, 1, 0, 0, 0]
    assert values(scored, "success") == [0] * 5
    assert scored.missing.tolist() == [False, False, True, False, False]
    assert scored.malformed["judgements"].tolist() == [False, False, False, True, False]


def test_verdict_words_and_extra_ids() -> None:
    scored = ev.score(
        PLAN,
        [gold(1)],
        [line({"V1": True, "V2": "PASS", "I1": "yes", "K1": "Pass.", "R1": "passed", "X9": "fail"}, ALL)],
    )
    assert scored.by_name()["success"].value() == 1.0
    bad = ev.score(PLAN, [gold(1)], [line({**ALL, "R1": "maybe"}, ALL)])
    assert bad.by_name()["R"].value() == 0.0


def test_reference_lists_use_the_last_reference_and_breakdowns_read_one_element_lists() -> None:
    g = gold(1, references=True)
    g["gold"]["visual"].insert(0, [{"id": "OLD", "text": "replaced"}])
    scored = ev.score(PLAN, [g, gold(2, language="Chinese")], [line(ALL, ALL), line(ALL, ALL)])
    assert scored.by_name()["success"].value() == 1.0
    summary = ev.summarize(scored, breakdowns=["gold.language"], resamples=200)
    assert set(summary["breakdowns"]["gold.language"]) == {"English", "Chinese"}
    assert summary["breakdowns"]["gold.language"]["English"]["success"]["n"] == 1


def test_items_with_an_empty_layer_are_left_out() -> None:
    scored = ev.score(PLAN, [gold(1), gold(2, k=())], [line(ALL, ALL), line(ALL, ALL)])
    assert scored.by_name()["success"].n == 1


def test_equals_metrics_checklist_on_random_decisions() -> None:
    rng = np.random.default_rng(7)
    golds, preds, checklists, j1, j2 = [], [], [], [], []
    for n in range(300):
        sizes = rng.integers(1, 5, size=4)
        ids = {x: [f"{x}{m}" for m in range(1, s + 1)] for x, s in zip("VIKR", sizes)}
        golds.append(gold(n, v=ids["V"], i=ids["I"], k=ids["K"], r=ids["R"]))
        checklists.append(ids)
        d1 = {rid: bool(rng.random() < 0.85) for x in "VIKR" for rid in ids[x]}
        d2 = {rid: bool(rng.random() < 0.8) for x in "VIKR" for rid in ids[x]}
        j1.append({x: {rid: d1[rid] for rid in ids[x]} for x in "VIKR"})
        j2.append({x: {rid: d2[rid] for rid in ids[x]} for x in "VIKR"})
        preds.append(
            line(
                {k: "pass" if v else "fail" for k, v in d1.items()}, {k: "pass" if v else "fail" for k, v in d2.items()}
            )
        )
    scored = ev.score(PLAN, golds, preds).by_name()
    both, one, two = vikr_scores(checklists, j1, j2), vikr_scores(checklists, j1), vikr_scores(checklists, j2)
    for prefix, ref in (("", both), ("judge1.", one), ("judge2.", two)):
        for col, letter in enumerate("VIKR"):
            assert scored[prefix + letter].values.tolist() == ref.layers[:, col].tolist()
        assert scored[prefix + "success"].values.tolist() == ref.success.tolist()
        assert scored[prefix + "success_3of4"].values.tolist() == ref.three_of_four.tolist()
    assert 0 < scored["success"].value() < scored["judge1.success"].value()


def test_offline_file_reading_keeps_judgements(tmp_path) -> None:
    golds = [gold(1), gold(2)]
    (tmp_path / "evaluation.json").write_text(json.dumps(PLAN))
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golds))
    preds = tmp_path / "judged.jsonl"
    preds.write_text(
        json.dumps({"item_id": 1, **line(ALL, ALL)}) + "\n" + json.dumps({"item_id": 2, **line(ALL, {"R1": "fail"})})
    )
    result = ev.release_evaluate(tmp_path, preds, split="test")
    assert result["figures"]["success"]["value"] == 0.5 and result["figures"]["judge1.success"]["value"] == 1.0
    assert result["figures"]["success"]["n"] == 2 and result["figures"]["success"]["ci"] == [0.0, 1.0]


@pytest.mark.parametrize("value", [{"V1": "pass"}, [1, 2], ["x"], [ALL, ALL, ALL]])
def test_malformed_judgements_values(value) -> None:
    assert isinstance(ev.clean_value({"kind": "judgements", "judges": 2}, value), type(ev.MISSING))
