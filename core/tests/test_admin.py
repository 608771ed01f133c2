"""Every model is in the admin with a list view that renders, and immutable records are read-only."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

pytestmark = pytest.mark.django_db

OURS = {
    "core",
    "projects",
    "candidates",
    "annotation",
    "adjudication",
    "workflow",
    "quality",
    "studies",
    "exports",
    "evaluation",
}
READ_ONLY = {"goldrecord", "annotationrevision", "release", "historyevent", "annotation", "importjob", "exportjob"}


def test_every_model_of_ours_is_registered():
    models = [m for m in apps.get_models() if m._meta.app_label in OURS]
    missing = [m._meta.label for m in models if m not in admin.site._registry]
    assert not missing, f"not in the admin: {missing}"


def test_every_list_view_renders_for_staff(client, django_user_model, project, items, annotator_a, annotator_b):
    from exports.factories import gold_create

    gold_create(project, items, [annotator_a, annotator_b])
    staff = django_user_model.objects.create_superuser("root", "root@example.org", "pw-root-12345")
    client.force_login(staff)
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label not in OURS:
            continue
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        assert client.get(url).status_code == 200, url
        if model._meta.model_name in READ_ONLY:
            assert not model_admin.has_change_permission(request=None), model
            assert not model_admin.has_delete_permission(request=None), model
