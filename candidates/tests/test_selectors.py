from __future__ import annotations

import dataclasses
import json

import pytest

from candidates.factories import replay_file_write
from candidates.models import Candidate
from candidates.selectors import (
    AnonymousCandidate,
    candidate_id_for_letter,
    candidates_for_annotator,
    candidates_with_identity,
)
from candidates.services import candidate_store, provider_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored(project, items, tmp_path, settings):
    name = replay_file_write(project, "")
    providers = [
        provider_create(
            project=project,
            name=f"secret-provider-{i}",
            kind="replay",
            model=f"secret-model-{i}",
            replay_file=name,
        )
        for i in range(3)
    ]
    item = items[0]
    for i, p in enumerate(providers):
        candidate_store(
            item=item,
            provider=p,
            prompt_version="v1",
            model_name=f"secret-model-{i}-served",
            reply_text=json.dumps(
                {
                    "think": f"think-{i}",
                    "label": "harmful",
                    "target_category": "gender",
                    "target_entity": f"entity {i}",
                    "text_mention": None,
                    "visual_region": [],
                }
            ),
            latency_ms=123,
            prompt_tokens=10,
            completion_tokens=5,
        )
    return item, providers


def test_anonymous_candidates_carry_letters_and_fields_only(stored, annotator_a):
    item, _ = stored
    cands = candidates_for_annotator(item=item, user=annotator_a)
    assert [c.letter for c in cands] == ["A", "B", "C"]
    assert all(isinstance(c, AnonymousCandidate) for c in cands)
    assert [f.name for f in dataclasses.fields(AnonymousCandidate)] == ["letter", "fields"]
    assert {c.fields["target_entity"] for c in cands} == {"entity 0", "entity 1", "entity 2"}
    dumped = json.dumps([dataclasses.asdict(c) for c in cands])
    for secret in ("secret-provider", "secret-model", "think-", "123"):
        assert secret not in dumped


def test_order_is_stable_per_annotator_and_differs_between_annotators(project, items, settings, annotator_a, make_user):
    from projects.services import membership_add

    name = replay_file_write(project, "")
    providers = [
        provider_create(project=project, name=f"p{i}", kind="replay", model=f"m{i}", replay_file=name) for i in range(3)
    ]
    orders = set()
    users = [annotator_a] + [make_user(f"ann{i}") for i in range(7)]
    for u in users[1:]:
        membership_add(project=project, user=u, role="annotator")
    for item in items:
        for i, p in enumerate(providers):
            candidate_store(
                item=item,
                provider=p,
                prompt_version="v1",
                model_name="m",
                reply_text=json.dumps({"label": "non-harmful", "entity_hint": i}),
                latency_ms=1,
                prompt_tokens=None,
                completion_tokens=None,
            )
        for u in users:
            first = [
                candidate_id_for_letter(item=item, user=u, letter=c.letter)
                for c in candidates_for_annotator(item=item, user=u)
            ]
            again = [
                candidate_id_for_letter(item=item, user=u, letter=c.letter)
                for c in candidates_for_annotator(item=item, user=u)
            ]
            assert first == again and len(set(first)) == 3
            orders.add(tuple(first))
    # 4 items x 8 annotators: a shuffle, not one fixed order (6 possible orders per item).
    assert len(orders) > 6


def test_order_depends_on_the_secret_key(stored, annotator_a, settings):
    item, _ = stored
    ids = {}
    for key in ("k" * 50, "j" * 50, "m" * 50, "n" * 50, "o" * 50):
        settings.SECRET_KEY = key
        ids[key] = tuple(candidate_id_for_letter(item=item, user=annotator_a, letter=x) for x in "ABC")
    assert len(set(ids.values())) > 1


def test_candidate_id_for_letter(stored, annotator_a):
    item, _ = stored
    ids = {candidate_id_for_letter(item=item, user=annotator_a, letter=x) for x in "ABC"}
    assert ids == set(Candidate.objects.filter(item=item).values_list("id", flat=True))
    assert candidate_id_for_letter(item=item, user=annotator_a, letter="D") is None


def test_only_the_latest_prompt_versions_successful_candidates(stored, annotator_a):
    item, providers = stored
    candidate_store(
        item=item,
        provider=providers[0],
        prompt_version="v2",
        model_name="m",
        latency_ms=1,
        reply_text=json.dumps({"label": "non-harmful"}),
        prompt_tokens=None,
        completion_tokens=None,
    )
    candidate_store(
        item=item,
        provider=providers[1],
        prompt_version="v2",
        model_name="m",
        latency_ms=1,
        reply_text="no json here",
        prompt_tokens=None,
        completion_tokens=None,
    )
    cands = candidates_for_annotator(item=item, user=annotator_a)
    # provider 0: its v2 answer; provider 1: its v2 reply failed, so nothing (not its v1);
    # provider 2: has not answered v2 yet, so its v1.
    assert sorted(c.fields["label"] for c in cands) == ["harmful", "non-harmful"]
    assert [c.letter for c in cands] == ["A", "B"]
    ident = {c.provider_name: c for c in candidates_with_identity(item=item)}
    assert set(ident) == {"secret-provider-0", "secret-provider-2"}
    assert ident["secret-provider-0"].prompt_version == "v2"


def test_a_candidate_with_every_field_removed_is_not_shown(stored, annotator_a):
    item, providers = stored
    candidate_store(
        item=item,
        provider=providers[2],
        prompt_version="v2",
        model_name="m",
        latency_ms=1,
        reply_text=json.dumps({"label": "maybe"}),
        prompt_tokens=None,
        completion_tokens=None,
    )
    assert len(candidates_for_annotator(item=item, user=annotator_a)) == 2


def test_identity_view_has_everything(stored):
    item, _ = stored
    rows = candidates_with_identity(item=item)
    assert [r.provider_name for r in rows] == ["secret-provider-0", "secret-provider-1", "secret-provider-2"]
    r = rows[0]
    assert r.provider_kind == "replay" and r.model_name == "secret-model-0-served"
    assert r.latency_ms == 123 and (r.prompt_tokens, r.completion_tokens) == (10, 5)
    assert r.raw_reply.startswith("{") and r.think == "think-0" and r.fields["label"] == "harmful"


def test_no_candidates_gives_empty_list(items, annotator_a):
    assert candidates_for_annotator(item=items[1], user=annotator_a) == []
    assert candidate_id_for_letter(item=items[1], user=annotator_a, letter="A") is None
    assert candidates_with_identity(item=items[1]) == []


def test_selector_query_count(stored, annotator_a, django_assert_max_num_queries):
    item, _ = stored
    with django_assert_max_num_queries(1):
        candidates_for_annotator(item=item, user=annotator_a)
