from __future__ import annotations

import pytest
from django.core.management import call_command

from candidates.models import Candidate, Provider
from candidates.selectors import candidates_for_annotator, candidates_with_identity
from projects.models import Item, Project, Stage

pytestmark = pytest.mark.django_db


def test_load_demo_configures_replay_providers_and_candidates():
    call_command("load_demo", "--quiet")
    project = Project.objects.get(slug="demo-meme3w")
    assert sorted(Provider.objects.filter(project=project).values_list("name", "kind")) == [
        ("model-1", "replay"),
        ("model-2", "replay"),
        ("model-3", "replay"),
    ]
    n_items = project.items.count()
    assert Candidate.objects.filter(item__project=project, parse_error="").count() == 3 * n_items
    assert not Item.objects.filter(project=project, stage=Stage.NEW).exists()

    item = project.items.get(source_id="demo-02")  # "Zorgians cannot be trusted with coffee"
    by_model = {c.provider_name: c for c in candidates_with_identity(item=item)}
    assert by_model["model-1"].fields["visual_region"] and by_model["model-2"].fields["visual_region"] == []
    assert by_model["model-1"].fields["target_entity"] != by_model["model-2"].fields["target_entity"]
    # Deliberate variations of model-3 show up as removed fields or a different label somewhere.
    m3 = Candidate.objects.filter(item__project=project, provider__name="model-3")
    assert any(c.removed for c in m3)
    labels = {(c.item_id, c.provider.name): c.fields["label"] for c in Candidate.objects.filter(item__project=project)}
    assert any(labels[(i, "model-3")] != labels[(i, "model-1")] for i, _ in labels)

    annotator = project.memberships.filter(role="annotator").first().user
    assert [c.letter for c in candidates_for_annotator(item=item, user=annotator)] == ["A", "B", "C"]

    aha = Project.objects.get(slug="demo-aha")
    assert Candidate.objects.filter(item__project=aha, parse_error="").count() == 3 * aha.items.count()
    assert all(c.fields.get("is_hateful") for c in Candidate.objects.filter(item__project=aha))

    # Idempotent: a second run adds nothing.
    total = Candidate.objects.count()
    call_command("load_demo", "--quiet")
    assert Candidate.objects.count() == total and Provider.objects.filter(project=project).count() == 3
