"""Members of a project: add existing people, invite new ones by a one-time link, bulk add from
CSV, roles, deactivation (past work stays). Every write path for Membership and Invitation.

Rules: a person may hold several roles; a deactivated member keeps their rows (their
annotations stay attributed and counted) but cannot act; a project always keeps at least one
active lead.
"""

from __future__ import annotations

import csv
import hashlib
import io
import secrets
from dataclasses import dataclass, field
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.errors import Conflict, Invalid, NotFound
from projects import hooks
from projects.models import Invitation, Membership, Project, Role

INVITE_DAYS = 7
MAX_CSV_BYTES = 1_000_000
MAX_CSV_ROWS = 2000
_USERNAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@.+-_")


def roles_parse(value, *, where: str = "roles") -> list[str]:
    """Roles from a list or a text ("annotator reviewer", "annotator;reviewer"); Invalid otherwise."""
    if isinstance(value, str):
        value = value.replace(";", " ").replace(",", " ").replace("|", " ").split()
    if not isinstance(value, (list, tuple)) or not value:
        raise Invalid("Choose at least one role.", errors={where: f"one or more of {', '.join(Role.values)}"})
    roles = [str(r).strip().lower() for r in value]
    unknown = [r for r in roles if r not in Role.values]
    if unknown:
        raise Invalid(
            f"Unknown role {unknown[0]!r}.",
            errors={where: f"unknown role {unknown[0]!r} (one of {', '.join(Role.values)})"},
        )
    return list(dict.fromkeys(roles))


def _active_leads(project: Project, *, exclude_user=None) -> int:
    qs = Membership.objects.filter(project=project, role=Role.LEAD, is_active=True)
    if exclude_user is not None:
        qs = qs.exclude(user=exclude_user)
    return qs.values("user").distinct().count()


def user_find(*, identifier: str):
    """An active user by username or email (case-insensitive), or None."""
    identifier = (identifier or "").strip()
    if not identifier:
        return None
    users = get_user_model().objects.filter(is_active=True)
    found = users.filter(username__iexact=identifier).first()
    if found is None and "@" in identifier:
        matches = list(users.filter(email__iexact=identifier)[:2])
        found = matches[0] if len(matches) == 1 else None
    return found


def member_add(*, project: Project, identifier: str, roles) -> tuple[object, list[str]]:
    """Give an existing person roles (adds to the roles they have; reactivates a deactivated
    member). Returns (user, roles added). Invalid when nobody has that username or email."""
    roles = roles_parse(roles)
    user = user_find(identifier=identifier)
    if user is None:
        raise Invalid(
            "Nobody has that username or email.",
            errors={"identifier": f"no active user “{identifier.strip()[:100]}”: invite them instead"},
        )
    with transaction.atomic():
        Project.objects.select_for_update().filter(pk=project.pk).first()
        existing = {m.role: m for m in Membership.objects.filter(project=project, user=user)}
        added = []
        for role in roles:
            m = existing.get(role)
            if m is None:
                Membership.objects.create(project=project, user=user, role=role)
                added.append(role)
            elif not m.is_active:
                Membership.objects.filter(pk=m.pk).update(is_active=True, deactivated_at=None)
                added.append(role)
        if not added:
            raise Conflict(f"{user.username} already has the role(s) {', '.join(roles)} in this project.")
    return user, added


def member_roles_set(*, project: Project, user, roles) -> list[str]:
    """Set exactly these roles for an active member (rows of removed roles are deactivated, so
    past work done in them stays attributed). The last active lead keeps the lead role."""
    roles = roles_parse(roles)
    with transaction.atomic():
        Project.objects.select_for_update().filter(pk=project.pk).first()
        rows = {m.role: m for m in Membership.objects.filter(project=project, user=user)}
        if not any(m.is_active for m in rows.values()):
            raise NotFound("This person is not an active member of the project.")
        if (
            Role.LEAD not in roles
            and rows.get(Role.LEAD)
            and rows[Role.LEAD].is_active
            and not _active_leads(project, exclude_user=user)
        ):
            raise Conflict("A project needs at least one lead: make someone else lead first.")
        now = timezone.now()
        for role, m in rows.items():
            if role not in roles and m.is_active:
                Membership.objects.filter(pk=m.pk).update(is_active=False, deactivated_at=now)
        for role in roles:
            m = rows.get(role)
            if m is None:
                Membership.objects.create(project=project, user=user, role=role)
            elif not m.is_active:
                Membership.objects.filter(pk=m.pk).update(is_active=True, deactivated_at=None)
    _forget_roles(user)
    return roles


def member_deactivate(*, project: Project, user) -> None:
    """The person can no longer act in the project; their annotations, decisions and audits
    stay (attributed and counted). Refused for the last active lead."""
    with transaction.atomic():
        Project.objects.select_for_update().filter(pk=project.pk).first()
        active = Membership.objects.filter(project=project, user=user, is_active=True)
        if not active.exists():
            raise NotFound("This person is not an active member of the project.")
        if active.filter(role=Role.LEAD).exists() and not _active_leads(project, exclude_user=user):
            raise Conflict("This is the project's last lead: make someone else lead before deactivating them.")
        active.update(is_active=False, deactivated_at=timezone.now())
        hooks.member_deactivated.send(project=project, user=user)
    _forget_roles(user)


def member_reactivate(*, project: Project, user) -> None:
    updated = Membership.objects.filter(project=project, user=user, is_active=False).update(
        is_active=True, deactivated_at=None
    )
    if not updated:
        raise NotFound("This person has no deactivated membership in the project.")
    _forget_roles(user)


def _forget_roles(user) -> None:
    if hasattr(user, "_concord_roles"):
        del user._concord_roles


# ---------------------------------------------------------------- invitations


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def invitation_create(*, project: Project, email: str, roles, by, days: int = INVITE_DAYS) -> tuple[Invitation, str]:
    """A one-time link for a new person. Returns (invitation, token): the token is shown once
    and only its hash is stored. Refused when the address belongs to a member already (add
    them instead) or has a pending invitation to the project."""
    email = (email or "").strip().lower()
    try:
        validate_email(email)
    except ValidationError:
        raise Invalid("That is not an email address.", errors={"email": "enter an email address"}) from None
    roles = roles_parse(roles)
    if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= 30:
        raise Invalid("The link must expire in 1 to 30 days.", errors={"days": "1 to 30"})
    if Membership.objects.filter(project=project, user__email__iexact=email, is_active=True).exists():
        raise Conflict(f"{email} is already a member of this project: change their roles on the members page.")
    if get_user_model().objects.filter(email__iexact=email, is_active=True).exists():
        raise Conflict(f"{email} already has an account: add them by username or email instead of inviting them.")
    now = timezone.now()
    if Invitation.objects.filter(
        project=project, email=email, accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=now
    ).exists():
        raise Conflict(f"{email} already has a pending invitation: revoke it to send a new one.")
    token = secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        project=project,
        email=email,
        roles=roles,
        token_sha256=_token_hash(token),
        created_by=by,
        expires_at=now + timedelta(days=days),
    )
    return invitation, token


def invitation_for_token(*, token: str) -> Invitation:
    """The pending invitation of a link; NotFound for unknown, used, revoked or expired links
    (one message: the link does not say which invitations exist)."""
    invitation = (
        Invitation.objects.select_related("project").filter(token_sha256=_token_hash(token or "")).first()
        if token
        else None
    )
    if (
        invitation is None
        or invitation.accepted_at is not None
        or invitation.revoked_at is not None
        or invitation.expires_at <= timezone.now()
    ):
        raise NotFound("This invitation link is not valid: it was used, revoked or has expired. Ask for a new one.")
    return invitation


def invitation_accept(*, token: str, username: str, password: str, password2: str):
    """The invitee chooses a username and password; the account is created with the invitation's
    email and roles, and the link is spent (conditional UPDATE: a second use fails)."""
    invitation = invitation_for_token(token=token)
    errors = {}
    username = (username or "").strip()
    User = get_user_model()
    if not username or len(username) > 150 or set(username) - _USERNAME_CHARS:
        errors["username"] = "up to 150 letters, digits and @ . + - _"
    elif User.objects.filter(username__iexact=username).exists():
        errors["username"] = "this username is taken: choose another"
    if password != password2:
        errors["password2"] = "the two passwords differ"
    else:
        try:
            validate_password(password, User(username=username, email=invitation.email))
        except ValidationError as exc:
            errors["password"] = " ".join(exc.messages)
    if errors:
        raise Invalid("The account could not be created.", errors=errors)
    with transaction.atomic():
        spent = Invitation.objects.filter(
            pk=invitation.pk, accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
        ).update(accepted_at=timezone.now())
        if not spent:
            raise NotFound("This invitation link is not valid any more. Ask for a new one.")
        user = User.objects.create_user(username=username, email=invitation.email, password=password)
        for role in invitation.roles:
            Membership.objects.get_or_create(project=invitation.project, user=user, role=role)
        Invitation.objects.filter(pk=invitation.pk).update(accepted_user=user)
    return user, invitation.project


def invitation_revoke(*, project: Project, invitation_id) -> None:
    try:
        pk = int(invitation_id)
    except (TypeError, ValueError):
        raise NotFound("No such invitation.") from None
    updated = Invitation.objects.filter(
        project=project, pk=pk, accepted_at__isnull=True, revoked_at__isnull=True
    ).update(revoked_at=timezone.now())
    if not updated:
        raise NotFound("No such pending invitation.")


# ---------------------------------------------------------------- CSV


@dataclass
class CsvResult:
    added: list[dict] = field(default_factory=list)
    invited: list[dict] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)


def members_import_csv(*, project: Project, data: bytes, by) -> CsvResult:
    """Rows ``username,email,roles`` (header optional; roles separated by spaces or ';').

    A row naming an existing user (by username, else email) gives them the roles; a row with
    an unknown user but an email makes an invitation (its link is in the result, shown once);
    every other row is listed with its problem and the good rows are still added."""
    if len(data) > MAX_CSV_BYTES:
        raise Invalid(f"The file is larger than {MAX_CSV_BYTES:,} bytes.", errors={"file": "too large"})
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Invalid("The file is not UTF-8 text (save it as CSV UTF-8).", errors={"file": "not UTF-8"}) from None
    if "\x00" in text:
        raise Invalid("The file is not a CSV file.", errors={"file": "binary content"})
    result = CsvResult()
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise Invalid(f"The file cannot be read as CSV: {exc}.", errors={"file": "not CSV"}) from None
    if len(rows) > MAX_CSV_ROWS + 1:
        raise Invalid(f"At most {MAX_CSV_ROWS} rows per file.", errors={"file": "too many rows"})
    seen: set[str] = set()
    for n, row in enumerate(rows, start=1):
        if not row or all(not c.strip() for c in row):
            continue
        cells = [c.strip() for c in row]
        if n == 1 and [c.lower() for c in cells[:3]] == ["username", "email", "roles"]:
            continue
        if len(cells) != 3:
            result.problems.append(
                {"row": n, "problem": f"expected 3 columns (username, email, roles), got {len(cells)}"}
            )
            continue
        username, email, roles_text = cells
        key = (username or email).lower()
        if not key:
            result.problems.append({"row": n, "problem": "no username and no email"})
            continue
        if key in seen:
            result.problems.append({"row": n, "problem": f"“{key[:60]}” appears on an earlier row"})
            continue
        seen.add(key)
        try:
            roles = roles_parse(roles_text)
        except Invalid as exc:
            result.problems.append({"row": n, "problem": next(iter(exc.errors.values()), exc.message)})
            continue
        user = user_find(identifier=username) if username else None
        if user is None and email:
            user = user_find(identifier=email)
        try:
            if user is not None:
                if email and user.email and user.email.lower() != email.lower():
                    raise Invalid(f"user {user.username} has another email address than {email}")
                _, added = member_add(project=project, identifier=user.username, roles=roles)
                result.added.append({"row": n, "username": user.username, "roles": added})
            elif email:
                invitation, token = invitation_create(project=project, email=email, roles=roles, by=by)
                result.invited.append({"row": n, "email": invitation.email, "roles": roles, "token": token})
            else:
                result.problems.append(
                    {"row": n, "problem": f"no user “{username[:60]}” and no email to invite them with"}
                )
        except (Invalid, Conflict, NotFound) as exc:
            detail = next(iter(exc.errors.values()), None) if exc.errors else None
            result.problems.append({"row": n, "problem": detail or exc.message})
    return result


def members_of(*, project: Project):
    """Every person with a membership row (active or not), with their roles: [{user, roles, active}]."""
    rows = Membership.objects.filter(project=project).select_related("user").order_by("user__username", "role")
    people: dict[int, dict] = {}
    for m in rows:
        entry = people.setdefault(m.user_id, {"user": m.user, "roles": [], "inactive_roles": [], "active": False})
        if m.is_active:
            entry["roles"].append(m.role)
            entry["active"] = True
        else:
            entry["inactive_roles"].append(m.role)
    return list(people.values())


def invitations_pending(*, project: Project):
    return Invitation.objects.filter(
        Q(accepted_at__isnull=True) & Q(revoked_at__isnull=True), project=project, expires_at__gt=timezone.now()
    ).order_by("-created_at")
