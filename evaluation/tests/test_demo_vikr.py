"""The demo hook: on a published VIKR release, two submitted models are scored by two replay
judges; the figures follow the demo's own decisions and the run is idempotent."""

from __future__ import annotations

import pytest

from evaluation.demo import VIKR_MODELS, demo_vikr_leaderboard
from evaluation.models import JudgeVerdict, Submission
from evaluation.selectors import leaderboard
from evaluation.tests.conftest import records

pytestmark = pytest.mark.django_db


def test_two_models_scored_by_two_replay_judges(vikr_release, lead, tmp_path) -> None:
    subs = demo_vikr_leaderboard(release=vikr_release, user=lead, folder=tmp_path / "demo", split="train")
    assert [s.model_name for s in subs] == list(VIKR_MODELS)
    n = len(records(vikr_release, "train"))
    thorough, literal = (s.scores["figures"] for s in subs)
    # thorough: misses R on every fourth item (k % 4 == 3); judge B fails I on every third (k % 3 == 0)
    ks = range(n)
    assert thorough["R"]["value"] == pytest.approx(sum(k % 4 != 3 for k in ks) / n)
    assert thorough["I"]["value"] == pytest.approx(sum(k % 3 != 0 for k in ks) / n)
    assert thorough["judge1.I"]["value"] == 1.0
    assert thorough["success"]["value"] == pytest.approx(sum(k % 4 != 3 and k % 3 != 0 for k in ks) / n)
    assert literal["I"]["value"] == 0.0 and literal["success"]["value"] == 0.0 and literal["V"]["value"] == 1.0
    board = leaderboard(release=vikr_release, split="train")
    assert [c["key"] for c in board["columns"]] == ["V", "I", "K", "R", "success", "success_3of4"]
    assert board["rows"][0]["model_name"] == VIKR_MODELS[0]
    assert (
        board["judge_agreement"]["figures"]["success"] is None
        or -1 <= board["judge_agreement"]["figures"]["success"] <= 1
    )
    verdicts = JudgeVerdict.objects.count()
    assert verdicts == 2 * 2 * n
    again = demo_vikr_leaderboard(release=vikr_release, user=lead, folder=tmp_path / "demo", split="train")
    assert [s.pk for s in again] == [s.pk for s in subs] and Submission.objects.count() == 2
    assert JudgeVerdict.objects.count() == verdicts


def test_refuses_a_release_that_is_not_vikr(release, lead, tmp_path) -> None:
    with pytest.raises(ValueError, match="not a VIKR release"):
        demo_vikr_leaderboard(release=release, user=lead, folder=tmp_path, split="train")
