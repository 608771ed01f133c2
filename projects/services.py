"""Write paths of projects: creating them (preset or a copy), schema and guideline versions,
study settings, memberships, stages. Members and invitations: projects.members."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.utils.text import slugify

from core.errors import Forbidden, Invalid, StaleVersion
from projects import hooks
from projects.fieldtypes import REGISTRY, SchemaError
from projects.models import GuidelineVersion, Item, Membership, Project, Role, SchemaVersion, WorkerHeartbeat
from projects.presets import PRESETS
from projects.schema import DEFAULT_THRESHOLDS, Schema
from projects.schema_io import schema_check
from projects.workflow import MAX_ANNOTATORS, Workflow

CREATE_PERMISSION = "projects.create_project"
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{1,79}$")
RESERVED_SLUGS = {"new", "api", "admin", "static", "media"}
#: Settings copied by "copy settings from" (never items, members, annotations or gold).
COPIED_SETTINGS = (
    "schema",
    "ocr_on_import",
    "guideline",
    "annotators_per_item",
    "thresholds",
    "auto_merge_rules",
    "claim_timeout_minutes",
    "session_item_cap",
    "phash_threshold",
    "split_ratios",
    "split_seed",
    "workflow",
    "skip_reasons",
    "audit_sample_size",
    "audit_strata",
)
MAX_GUIDELINE = 100_000


def user_can_create_projects(user) -> bool:
    return bool(user.is_authenticated and user.is_active and (user.is_superuser or user.has_perm(CREATE_PERMISSION)))


def check_name_slug(name: str, slug: str) -> tuple[str, str]:
    errors = {}
    name = (name or "").strip()
    slug = (slug or "").strip().lower() or slugify(name)[:80]
    if not name:
        errors["name"] = "give the project a name"
    elif len(name) > 200:
        errors["name"] = "at most 200 characters"
    if not _SLUG.match(slug):
        errors["slug"] = "2 to 80 lower-case letters, digits and hyphens, starting with a letter or digit"
    elif slug in RESERVED_SLUGS:
        errors["slug"] = f"“{slug}” is reserved: choose another"
    elif Project.objects.filter(slug=slug).exists():
        errors["slug"] = f"“{slug}” is taken by another project: choose another"
    if errors:
        raise Invalid("The project could not be created.", errors=errors)
    return name, slug


def project_create(
    *,
    name: str,
    slug: str,
    preset: str,
    lead=None,
    annotators_per_item: int | None = None,
    copy_from: Project | None = None,
) -> Project:
    """A new project from a preset (schema, guideline, workflow, skip reasons, auto-merge rules,
    lexicon seed), or with every setting of ``copy_from`` (``preset`` is then the source's).
    ``lead`` becomes its lead. Raises Invalid naming the field (slug taken, unknown preset)."""
    name, slug = check_name_slug(name, slug)
    if copy_from is not None:
        conf = {key: copy.deepcopy(getattr(copy_from, key)) for key in COPIED_SETTINGS}
        preset = copy_from.preset
    else:
        if preset not in PRESETS:
            raise Invalid("Choose a preset.", errors={"preset": f"one of {', '.join(PRESETS)}"})
        p = PRESETS[preset]
        conf = {
            "schema": copy.deepcopy(p["schema"]),
            "guideline": p["guideline"],
            "annotators_per_item": annotators_per_item or p["annotators_per_item"],
            "split_ratios": [0.85, 0.05, 0.10],
            "workflow": copy.deepcopy(p.get("workflow", [])),
            "auto_merge_rules": list(p.get("auto_merge_rules", [])),
            "skip_reasons": copy.deepcopy(p.get("skip_reasons", [])),
            "ocr_on_import": p.get("ocr_on_import", False),
        }
    # A preset (or a stored project) that does not validate is a bug: fail loudly here.
    Workflow.from_data(conf.get("workflow"), schema=Schema(conf["schema"]))
    conf["schema"] = {**conf["schema"], "version": 1}
    try:
        with transaction.atomic():
            project = Project.objects.create(name=name, slug=slug, preset=preset, schema_version=1, **conf)
            SchemaVersion.objects.create(project=project, version=1, schema=project.schema)
            GuidelineVersion.objects.create(
                project=project,
                version=1,
                text=project.guideline,
                created_by=lead,
                note=f"copied from {copy_from.name}" if copy_from else f"preset {preset}",
            )
            if lead is not None:
                Membership.objects.create(project=project, user=lead, role=Role.LEAD)
            hooks.project_created.send(project=project)
    except IntegrityError:  # two people took the slug at the same moment
        raise Invalid("The project could not be created.", errors={"slug": f"“{slug}” is taken: choose another"})
    return project


def project_create_for_user(*, user, name: str, slug: str, preset: str = "", copy_from_slug: str = "") -> Project:
    """What the create page and endpoint call: the user needs the "can create projects"
    permission (granted by site staff); "copy settings from" only names a project they lead."""
    if not user_can_create_projects(user):
        raise Forbidden("You may not create projects: ask the site staff for the “can create projects” permission.")
    source = None
    if copy_from_slug:
        source = Project.objects.filter(
            slug=copy_from_slug, memberships__user=user, memberships__role=Role.LEAD, memberships__is_active=True
        ).first()
        if source is None:
            raise Invalid("The project could not be created.", errors={"copy_from": "choose a project you lead"})
    elif not preset:
        raise Invalid("The project could not be created.", errors={"preset": "choose a preset or a project to copy"})
    return project_create(name=name, slug=slug, preset=preset, lead=user, copy_from=source)


def project_creator_set(*, staff, user, allowed: bool) -> None:
    """Site staff grant or withdraw "can create projects"."""
    if not (staff.is_authenticated and staff.is_staff):
        raise Forbidden("Only site staff decide who may create projects.")
    perm = Permission.objects.get(codename="create_project", content_type__app_label="projects")
    if allowed:
        user.user_permissions.add(perm)
    else:
        user.user_permissions.remove(perm)
    for attr in ("_perm_cache", "_user_perm_cache"):
        if hasattr(user, attr):
            delattr(user, attr)


def creator_invite(*, staff, username: str, email: str) -> tuple[Any, str, str]:
    """Site staff bring in a new person who may create projects (there is no open sign-up): an
    account without a usable password and the permission; returns (user, uidb64, token) for a
    one-time "set your password" link (Django's password-reset token: it stops working once the
    password is set and expires after PASSWORD_RESET_TIMEOUT)."""
    if not (staff.is_authenticated and staff.is_staff):
        raise Forbidden("Only site staff decide who may create projects.")
    User = get_user_model()
    username, email = (username or "").strip(), (email or "").strip().lower()
    errors = {}
    if not re.fullmatch(r"[\w.@+-]{1,150}", username):
        errors["username"] = "up to 150 letters, digits and @ . + - _"
    elif User.objects.filter(username__iexact=username).exists():
        errors["username"] = "this username is taken: give the existing user the permission instead"
    try:
        validate_email(email)
    except ValidationError:
        errors["email"] = "enter an email address"
    if errors:
        raise Invalid("The account could not be made.", errors=errors)
    with transaction.atomic():
        user = User.objects.create_user(username=username, email=email)
        user.set_unusable_password()
        user.save(update_fields=["password"])
        project_creator_set(staff=staff, user=user, allowed=True)
    return user, urlsafe_base64_encode(force_bytes(user.pk)), default_token_generator.make_token(user)


# ---------------------------------------------------------------- schema


def project_schema_update(
    *, project: Project, schema: dict, expected_version: int | None = None, in_place: bool = False
) -> Project:
    """Replace the schema (validated through the registry, every problem named).

    A new version when ``in_place`` is false (annotations keep the version they were made
    under); ``in_place`` rewrites the current version (only before any annotation exists:
    the caller, workflow.services.schema_change, decides). ``expected_version``: the version
    the editor was opened on; another one -> StaleVersion (nothing overwritten).

    Locks: the project row (select_for_update), so two saves cannot take the same number.
    """
    clean = schema_check(schema)
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)
        if expected_version is not None and expected_version != project.schema_version:
            raise StaleVersion(
                f"The schema was changed elsewhere (now version {project.schema_version}, you edited "
                f"{expected_version}). Reload; your edits are still in the form."
            )
        try:
            Workflow.from_data(project.workflow or None, schema=Schema(clean))
        except SchemaError as exc:
            raise Invalid(f"The workflow's stages do not fit this schema: {exc}", errors={"workflow": str(exc)})
        if not in_place:
            project.schema_version += 1
        project.schema = {**clean, "version": project.schema_version}
        project.save(update_fields=["schema", "schema_version"])
        SchemaVersion.objects.update_or_create(
            project=project, version=project.schema_version, defaults={"schema": project.schema}
        )
    return project


# ---------------------------------------------------------------- guideline


def guideline_save(*, project: Project, text: str, user=None, note: str = "", expected_version: int | None = None):
    """A new guideline version (Markdown). Unchanged text -> the current version, no new one."""
    if not isinstance(text, str) or not text.strip():
        raise Invalid("The guideline is empty.", errors={"text": "write the guideline"})
    if len(text) > MAX_GUIDELINE or "\x00" in text:
        raise Invalid(
            "The guideline cannot be saved.", errors={"text": f"at most {MAX_GUIDELINE:,} characters of text"}
        )
    note = (note or "").strip()
    if len(note) > 300:
        raise Invalid("The note is too long.", errors={"note": "at most 300 characters"})
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)
        if expected_version is not None and expected_version != project.guideline_version:
            raise StaleVersion(
                f"The guideline was changed elsewhere (now version {project.guideline_version}). "
                "Reload; your text is still in the form."
            )
        if text == project.guideline:
            return GuidelineVersion.objects.get_or_create(
                project=project, version=project.guideline_version, defaults={"text": text}
            )[0]
        project.guideline_version += 1
        project.guideline = text
        project.save(update_fields=["guideline", "guideline_version"])
        return GuidelineVersion.objects.create(
            project=project, version=project.guideline_version, text=text, note=note, created_by=user
        )


# ---------------------------------------------------------------- study settings

AUTO_MERGE_RULES = {
    "entity_canonical": "Entities with the same canonical form (lexicon) are merged to the form most annotators wrote.",
    "boxes_mean": "Box sets with the same number of boxes, matched by IoU ≥ 0.5, are averaged.",
    "majority": "With 3 or more annotators, a value chosen by a strict majority becomes gold (provenance "
    "“majority”); fields without one go to a reviewer.",
}
SETTINGS_KEYS = (
    "annotators_per_item",
    "claim_timeout_minutes",
    "session_item_cap",
    "skip_reasons",
    "thresholds",
    "auto_merge_rules",
    "audit_sample_size",
    "audit_strata",
    "split_ratios",
    "split_seed",
    "phash_threshold",
    "workflow",
    "ocr_on_import",
)
_KEY = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def _int(value: Any, lo: int, hi: int, errors: dict, key: str, rule: str) -> int | None:
    if isinstance(value, bool):
        value = None
    try:
        n = int(value)
        if str(value).strip() not in (str(n), f"{n}.0"):
            raise ValueError
    except (TypeError, ValueError):
        errors[key] = f"a whole number from {lo} to {hi}"
        return None
    if not lo <= n <= hi:
        errors[key] = f"{rule} ({lo} to {hi})"
        return None
    return n


def settings_clean(*, project: Project, data: dict) -> dict:
    """The study settings in ``data`` (any subset of SETTINGS_KEYS), checked: Invalid names each
    bad setting and its rule. Pure: nothing is saved."""
    if not isinstance(data, dict):
        raise Invalid("Settings must be an object.")
    unknown = sorted(set(data) - set(SETTINGS_KEYS))
    errors: dict[str, str] = {}
    if unknown:
        errors["__all__"] = f"unknown setting(s): {', '.join(map(str, unknown))}"
    clean: dict[str, Any] = {}
    schema = project.get_schema()
    if "annotators_per_item" in data:
        clean["annotators_per_item"] = _int(
            data["annotators_per_item"], 1, MAX_ANNOTATORS, errors, "annotators_per_item", "annotators per item"
        )
    if "claim_timeout_minutes" in data:
        clean["claim_timeout_minutes"] = _int(
            data["claim_timeout_minutes"],
            5,
            7 * 24 * 60,
            errors,
            "claim_timeout_minutes",
            "minutes before a claim expires",
        )
    if "session_item_cap" in data:
        clean["session_item_cap"] = _int(
            data["session_item_cap"], 0, 10_000, errors, "session_item_cap", "items per session"
        )
    if "audit_sample_size" in data:
        clean["audit_sample_size"] = _int(data["audit_sample_size"], 1, 100_000, errors, "audit_sample_size", "items")
    if "split_seed" in data:
        clean["split_seed"] = _int(data["split_seed"], 0, 2**31 - 1, errors, "split_seed", "seed")
    if "phash_threshold" in data:
        clean["phash_threshold"] = _int(data["phash_threshold"], 0, 32, errors, "phash_threshold", "Hamming distance")
    if "skip_reasons" in data:
        reasons = data["skip_reasons"]
        ok = isinstance(reasons, list) and 1 <= len(reasons) <= 20
        seen = set()
        for entry in reasons if ok else []:
            if not (
                isinstance(entry, (list, tuple))
                and len(entry) == 2
                and all(isinstance(x, str) for x in entry)
                and _KEY.match(entry[0])
                and 0 < len(entry[1].strip()) <= 200
                and entry[0] not in seen
            ):
                ok = False
                break
            seen.add(entry[0])
        if not ok:
            errors["skip_reasons"] = "1 to 20 lines “key: label” (key: lower-case letters, digits, _; keys differ)"
        elif "other" not in seen:
            errors["skip_reasons"] = "keep the reason “other” (it asks the annotator for a note)"
        else:
            clean["skip_reasons"] = [[k, v.strip()] for k, v in reasons]
    if "thresholds" in data:
        th = data["thresholds"]
        if not isinstance(th, dict) or set(th) - set(DEFAULT_THRESHOLDS):
            errors["thresholds"] = f"an object with some of {', '.join(DEFAULT_THRESHOLDS)}"
        else:
            bad = [
                k for k, v in th.items() if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1
            ]
            if bad:
                errors["thresholds"] = f"{', '.join(bad)}: a number between 0 and 1"
            else:
                clean["thresholds"] = {k: float(v) for k, v in th.items()}
    if "auto_merge_rules" in data:
        rules = data["auto_merge_rules"]
        if not isinstance(rules, list) or any(r not in AUTO_MERGE_RULES for r in rules):
            errors["auto_merge_rules"] = f"a list of some of {', '.join(AUTO_MERGE_RULES)}"
        else:
            clean["auto_merge_rules"] = sorted(set(rules))
    if "audit_strata" in data:
        strata = data["audit_strata"]
        if not isinstance(strata, list) or any(s not in schema.by_name for s in strata) or len(strata) > 4:
            errors["audit_strata"] = "up to 4 names of schema fields"
        else:
            clean["audit_strata"] = list(dict.fromkeys(strata))
    if "split_ratios" in data:
        ratios = data["split_ratios"]
        try:
            values = [float(r) for r in ratios]
            if len(values) != 3 or any(v < 0 or v != v or v == float("inf") for v in values) or sum(values) <= 0:
                raise ValueError
            clean["split_ratios"] = [round(v / sum(values), 6) for v in values]
        except (TypeError, ValueError):
            errors["split_ratios"] = "three non-negative numbers [train, val, test] with a positive sum"
    if "ocr_on_import" in data:
        if not isinstance(data["ocr_on_import"], bool):
            errors["ocr_on_import"] = "true or false"
        else:
            clean["ocr_on_import"] = data["ocr_on_import"]
    if "workflow" in data:
        workflow, problem = _workflow_read(data["workflow"])
        problem = problem or _workflow_problem(project, workflow)
        if problem:
            errors["workflow"] = problem
        else:
            clean["workflow"] = workflow
    n = clean.get("annotators_per_item") or project.annotators_per_item
    rules = clean.get("auto_merge_rules", project.auto_merge_rules or [])
    if "majority" in rules and n < 3 and not errors.get("annotators_per_item"):
        errors["auto_merge_rules"] = (
            f"majority vote needs 3 or more annotators per item (this project has {n}): with 2, any difference is a tie"
        )
    if errors:
        raise Invalid("Some settings cannot be used: nothing was saved.", errors=errors)
    return clean


def _stage_shape(stages) -> list[tuple]:
    return [(s.get("name"), tuple(s.get("fields") or ())) for s in stages or []]


def _workflow_read(value) -> tuple[Any, str]:
    """The workflow as data: a list (REST) or its JSON text (the settings page)."""
    if isinstance(value, str):
        if len(value) > 200_000:
            return None, "at most 200,000 characters"
        if not value.strip():
            return [], ""
        try:
            value = json.loads(value)
        except ValueError as exc:
            return None, f"not valid JSON: {exc}"
    return value, ""


def _workflow_problem(project: Project, workflow) -> str:
    """Why ``workflow`` (stages as data, projects.workflow) cannot be used, or "". Once items are
    under way the stages and their fields stay as they are (annotations belong to a stage); who
    works a stage, how many, what it shows and its instructions may change."""
    if not isinstance(workflow, list):
        return "a list of stages (empty: one stage with every field)"
    try:
        Workflow.from_data(workflow, schema=project.get_schema())
    except SchemaError as exc:
        return str(exc)
    started = Item.objects.filter(project=project).exclude(stage="new").exists()
    if started and _stage_shape(workflow) != _stage_shape(project.workflow):
        return (
            "annotation has started: the stages and the fields of each stay as they are "
            "(you may change who works a stage, how many, what it shows and its instructions)"
        )
    return ""


def project_settings_save(*, project: Project, settings: dict) -> Project:
    """Save checked settings (settings_clean's output). Callers that change annotators per item
    go through workflow.services.study_settings_update, which explains the effect on items first."""
    if not settings:
        return project
    with transaction.atomic():
        locked = Project.objects.select_for_update().get(pk=project.pk)
        for key, value in settings.items():
            setattr(locked, key, value)
        locked.save(update_fields=list(settings))
    return locked


def split_preview(*, ratios, n: int) -> list[dict]:
    """Approximate split sizes of ``n`` items for ``ratios`` (largest remainder), and which would be
    empty. The release applies its own stratified rule (exports.splitting); this is the preview."""
    total = sum(ratios) or 1.0
    quotas = [r / total * n for r in ratios]
    sizes = [int(q) for q in quotas]
    order = sorted(range(3), key=lambda i: quotas[i] - sizes[i], reverse=True)
    for i in order[: n - sum(sizes)]:
        sizes[i] += 1
    return [
        {"split": name, "ratio": round(r / total, 4), "items": size, "empty": size == 0}
        for name, r, size in zip(("train", "val", "test"), ratios, sizes)
    ]


def skip_reasons_of(project: Project) -> list[list[str]]:
    if project.skip_reasons:
        return project.skip_reasons
    return PRESETS.get(project.preset, PRESETS["custom"]).get("skip_reasons") or PRESETS["custom"]["skip_reasons"]


def threshold_keys() -> dict[str, list[str]]:
    """Which field types each project-wide threshold applies to (for the settings page)."""
    out: dict[str, list[str]] = {k: [] for k in DEFAULT_THRESHOLDS}
    for ftype in REGISTRY.values():
        if ftype.threshold_key in out:
            out[ftype.threshold_key].append(ftype.label)
    return out


# ---------------------------------------------------------------- memberships, items


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
