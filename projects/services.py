"""Write paths of projects: creating them with a preset, schema versions, memberships, stages."""

from __future__ import annotations

from django.db import transaction

from projects import hooks
from projects.models import Item, Membership, Project, Role, SchemaVersion, WorkerHeartbeat
from projects.presets import PRESETS
from projects.schema import Schema
from projects.workflow import Workflow


def project_create(*, name: str, slug: str, preset: str, lead=None, annotators_per_item: int | None = None) -> Project:
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r} (known: {', '.join(PRESETS)})")
    conf = PRESETS[preset]
    # A preset that does not validate is a bug: fail loudly here.
    Workflow.from_data(conf.get("workflow"), schema=Schema(conf["schema"]))
    with transaction.atomic():
        project = Project.objects.create(
            name=name,
            slug=slug,
            preset=preset,
            schema=conf["schema"],
            schema_version=conf["schema"].get("version", 1),
            guideline=conf["guideline"],
            annotators_per_item=annotators_per_item or conf["annotators_per_item"],
            split_ratios=[0.85, 0.05, 0.10],
            workflow=conf.get("workflow", []),
            ocr_on_import=conf.get("ocr_on_import", False),
        )
        SchemaVersion.objects.create(project=project, version=project.schema_version, schema=project.schema)
        if lead is not None:
            Membership.objects.create(project=project, user=lead, role=Role.LEAD)
        hooks.project_created.send(project=project)
    return project


def project_schema_update(*, project: Project, schema: dict) -> Project:
    """Replace the schema (validated) as a new version; old versions are kept."""
    Schema(schema)
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)
        project.schema_version += 1
        project.schema = {**schema, "version": project.schema_version}
        project.save(update_fields=["schema", "schema_version"])
        SchemaVersion.objects.create(project=project, version=project.schema_version, schema=project.schema)
    return project


def membership_add(*, project: Project, user, role: str) -> Membership:
    if role not in Role.values:
        raise ValueError(f"unknown role {role!r}")
    membership, _ = Membership.objects.get_or_create(project=project, user=user, role=role)
    return membership


def item_stage_set(*, item: Item, stage: str) -> None:
    Item.objects.filter(pk=item.pk).update(stage=stage)
    item.stage = stage


def heartbeat_record(*, token: str, hostname: str) -> WorkerHeartbeat:
    beat, _ = WorkerHeartbeat.objects.get_or_create(token=token, defaults={"hostname": hostname})
    return beat
