"""Test data made through the services, as users would make it."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

from django.contrib.auth import get_user_model
from PIL import Image, ImageDraw

from projects.imports import import_job_create, import_job_run
from projects.models import Item, Project
from projects.services import membership_add, project_create

PASSWORD = "correct-horse-battery-staple"


def user_create(username: str, **extra):
    user = get_user_model().objects.create_user(username=username, password=PASSWORD, **extra)
    return user


def image_bytes(seed: int, *, size=(320, 240), fmt="JPEG") -> bytes:
    rnd = random.Random(seed)
    img = Image.new("RGB", size, tuple(rnd.randrange(256) for _ in range(3)))
    draw = ImageDraw.Draw(img)
    for _ in range(6):
        x1, y1 = rnd.randrange(size[0] - 20), rnd.randrange(size[1] - 20)
        draw.rectangle(
            [x1, y1, x1 + rnd.randrange(10, 80), y1 + rnd.randrange(10, 80)],
            fill=tuple(rnd.randrange(256) for _ in range(3)),
        )
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


def source_write(folder: Path, rows: list[dict], files: dict[str, bytes], *, manifest="manifest.jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    (folder / manifest).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def items_create(project: Project, folder: Path, n: int, *, start: int = 0, texts=None) -> list[Item]:
    rows, files = [], {}
    for i in range(start, start + n):
        files[f"img{i}.jpg"] = image_bytes(i)
        text = texts[i - start] if texts else f"Meme number {i}: people from Planet Zorg again"
        rows.append({"image": f"img{i}.jpg", "text": text, "source_id": f"s{i}", "source_dataset": "test"})
    job = import_job_run(
        job=import_job_create(project=project, user=None, source_name="test"), path=source_write(folder, rows, files)
    )
    assert not job.errors, job.errors
    return list(Item.objects.filter(project=project, source_id__in=[r["source_id"] for r in rows]).order_by("id"))


def project_with_members(slug: str = "p1", preset: str = "meme3w", **roles) -> Project:
    """roles: role name -> list of users."""
    project = project_create(name=slug.upper(), slug=slug, preset=preset)
    for role, users in roles.items():
        for u in users:
            membership_add(project=project, user=u, role=role)
    return project
