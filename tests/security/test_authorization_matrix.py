"""Authorization matrix generated from the URL resolver and the OpenAPI schema.

Every URL pattern of the project is requested by every persona (anonymous, an outsider who is
a member of another project only, and each role of the project) with the ids of the own
project and of a foreign one, using the methods its policy declares (GET for pages; writes
with an empty body: a refusal must come before validation). The expected status comes from
``POLICY``, a table keyed by URL name: a new URL without a policy fails
``test_every_url_pattern_has_a_policy``. The ids are those of real objects (world.py), so an
allowed request reaches its view.

Expected:
* anonymous: pages redirect to the login page, the API answers 401;
* a non-member (the outsider, or any member of the own project on the foreign project): 404;
* a member whose role the policy does not list: 403;
* an allowed role with the ids of another project under its own project's slug: 404;
* an allowed role with its own ids: not refused (no 401/403/404/405, no login redirect, no 5xx).
Any 2xx where a refusal is expected fails. For the API, every status seen must also be listed
for its operation in the OpenAPI schema, and the schema and the resolver must name the same
endpoints with the same methods.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern, RoutePattern

from .world import World

pytestmark = pytest.mark.django_db

L, A, R, U, S = "lead", "annotator", "reviewer", "auditor", "researcher"
ROLES = (L, A, R, U, S)
PUBLIC, AUTHENTICATED, MEMBER, STAFF = "public", "authenticated", "member", "staff"
#: Needs a site-wide grant no persona has (is_staff, or "can create projects"): anonymous callers
#: go to the login page (401 for the API), everyone else is refused with 403.
GRANTED = "granted"


@dataclass(frozen=True)
class Policy:
    """Who may call a URL. ``who``: PUBLIC, AUTHENTICATED, MEMBER (any role of the project),
    STAFF, or a set of roles; per method when it differs (``{"GET": ..., "POST": ...}``)."""

    who: object
    methods: tuple[str, ...] = ("GET",)
    #: URL kwarg -> world.ids key, where the default (DEFAULT_IDS) is not the right object.
    ids: dict[str, str] = field(default_factory=dict)
    query: dict[str, object] = field(default_factory=dict)

    def allowed(self, method: str):
        return self.who[method] if isinstance(self.who, dict) else self.who


def roles(*names: str) -> frozenset[str]:
    return frozenset(names)


G, P, GP = ("GET",), ("POST",), ("GET", "POST")
HELD, AUDITED = {"item_id": "item_held"}, {"item_id": "item_audited"}

POLICY: dict[str, Policy] = {
    # accounts, API meta
    "login": Policy(PUBLIC, GP),
    "logout": Policy(PUBLIC, P),
    "password_change": Policy(AUTHENTICATED, GP),
    "password_change_done": Policy(AUTHENTICATED),
    "api_token": Policy(AUTHENTICATED, GP),
    "api_schema": Policy(PUBLIC),  # the schema names endpoints, no data
    "api_docs": Policy(PUBLIC),
    "home": Policy(AUTHENTICATED),
    # projects
    "project_detail": Policy(MEMBER),
    "import_page": Policy(roles(L), GP),
    # The one job view of every kind (core.jobs): imports are the leads'.
    "job_partial": Policy(roles(L), ids={"job_id": "import_job"}),
    "job_cancel": Policy(roles(L), P, ids={"job_id": "import_job"}),
    "api_job": Policy(roles(L), ids={"job_id": "import_job"}),
    "api_job_cancel": Policy(roles(L), P, ids={"job_id": "import_job"}),
    # The held item: the lead and the annotator holding it; it is not audited, reviewed or
    # released, so every other role is refused (the full rule: tests/security/test_images.py).
    "item_image": Policy(roles(L, A), ids=HELD),
    "item_image_variant": Policy(roles(L, A), ids=HELD),
    # OCR and text-free variants (projects.ocr): the leads'.
    "ocr_start": Policy(roles(L), P),
    "variant_upload": Policy(roles(L), P),
    "api_ocr": Policy(roles(L), GP),
    "api_item_variant": Policy(roles(L), P),
    "api_projects": Policy({"GET": AUTHENTICATED, "POST": GRANTED}, GP),
    # study setup (issue 12)
    "project_create": Policy(GRANTED, GP),
    "staff_creators": Policy(GRANTED, GP),
    "api_project_creators": Policy(GRANTED, P),
    "invitation": Policy(PUBLIC, GP, ids={"token": "invite_token"}),
    "api_invitation_accept": Policy(PUBLIC, P),
    "set_password": Policy(PUBLIC, ids={"uidb64": "reset_uid", "token": "reset_token"}),
    "set_password_done": Policy(PUBLIC),
    "guideline_page": Policy(roles(L), GP),
    "guideline_preview": Policy(roles(L), P),
    "guideline_version": Policy(roles(L, A, R, U)),
    "api_guideline": Policy({"GET": roles(L, A, R, U), "POST": roles(L)}, GP),
    "annotate_guideline_seen": Policy(roles(A, U), P),
    "schema_editor": Policy(roles(L), GP),
    "schema_preview": Policy(roles(L), P),
    "schema_preview_check": Policy(roles(L), P),
    "schema_export": Policy(roles(L)),
    "api_schema_edit": Policy(roles(L), GP),
    "api_schema_check": Policy(roles(L), P),
    "members_page": Policy(roles(L), GP),
    "api_members": Policy(roles(L), GP),
    "api_member": Policy(roles(L), P, ids={"user_id": "member_user"}),
    "api_members_csv": Policy(roles(L), P),
    "api_invitations": Policy(roles(L), GP),
    "api_invitation": Policy(roles(L), P, ids={"invitation_id": "invitation"}),
    "settings_page": Policy(roles(L), GP),
    "settings_split_preview": Policy(roles(L), P),
    "api_settings": Policy(roles(L), GP),
    "api_project": Policy(MEMBER),
    "api_import_start": Policy(roles(L), P),
    "api_import_job": Policy(roles(L), ids={"job_id": "import_job"}),
    # annotation and blind audit
    "annotate_home": Policy(roles(A)),
    "annotate_next": Policy(roles(A), P),
    "annotate_progress": Policy(roles(A)),
    "annotate_warning": Policy(roles(A, U), GP),
    "annotate_preferences": Policy(roles(A, U), P),
    "annotate_item": Policy(roles(A), ids=HELD),
    "annotate_skip": Policy(roles(A), P, ids=HELD),
    "annotate_flag": Policy(roles(A), P, ids=HELD),
    "api_annotate_flag": Policy(roles(A), P, ids=HELD),
    "audit_home": Policy(roles(U)),
    "audit_item": Policy(roles(U), ids=AUDITED),
    "audit_next": Policy(roles(U), P),
    "api_annotate_next": Policy(roles(A), P),
    "api_annotate_state": Policy(roles(A), ids=HELD),
    "api_annotate_draft": Policy(roles(A), P, ids=HELD),
    "api_annotate_submit": Policy(roles(A), P, ids=HELD),
    "api_annotate_skip": Policy(roles(A), P, ids=HELD),
    "api_audit_state": Policy(roles(U), ids=AUDITED),
    "api_audit_draft": Policy(roles(U), P, ids=AUDITED),
    "api_audit_submit": Policy(roles(U), P, ids=AUDITED),
    "api_audit_skip": Policy(roles(U), P, ids=AUDITED),
    # adjudication, lexicon, items
    "review_home": Policy(roles(R)),
    "review_next": Policy(roles(R), P),
    "review_task": Policy(roles(R)),
    "review_draft": Policy(roles(R), P),
    "review_decide": Policy(roles(R), P),
    # Only the reviewer's own decision (404 for another reviewer's, as for another project's).
    "review_revise": Policy(roles(R), P),
    "lexicon_page": Policy(roles(L), GP),
    "lexicon_csv": Policy(roles(L)),
    "items_page": Policy(roles(L)),
    "item_history": Policy(roles(L)),
    "item_send_back": Policy(roles(L), P),
    # candidates (model identities: leads; researchers read an item's identified candidates)
    "candidate_jobs": Policy(roles(L), GP),
    "candidate_skip": Policy(roles(L), P),
    "candidate_providers": Policy(roles(L), GP),
    "candidate_provider_edit": Policy(roles(L), GP),
    "candidate_provider_toggle": Policy(roles(L), P),
    "candidate_job": Policy(roles(L), ids={"job_id": "candidate_job"}),
    "candidate_job_retry": Policy(roles(L), P, ids={"job_id": "candidate_job"}),
    "candidate_item": Policy(roles(L, S)),
    "candidate_item_anonymous": Policy(roles(A), ids=HELD),
    "api_candidate_providers": Policy(roles(L)),
    "api_candidate_job_start": Policy(roles(L), P),
    "api_candidate_job": Policy(roles(L), ids={"job_id": "candidate_job"}),
    "api_item_candidates": Policy(roles(L, S, A), ids=HELD),
    # near-duplicates, splits, releases
    "duplicates_page": Policy(roles(L, R)),
    "duplicates_scan": Policy(roles(L), P),
    "duplicate_review": Policy(roles(L, R), P),
    "splits_page": Policy(roles(L)),
    "releases_page": Policy(roles(L, S)),
    "release_build_start": Policy(roles(L), P),
    "release_diff_page": Policy(roles(L, S), query={"from": "release", "to": "release"}),
    "release_page": Policy(roles(L, S)),
    "release_settings_save": Policy(roles(L), P),
    "release_push_start": Policy(roles(L), P),
    "api_releases": Policy(roles(L, S)),
    "api_release": Policy(roles(L, S)),
    "api_release_manifest": Policy(roles(L, S)),
    "api_release_records": Policy(roles(L, S)),
    "api_release_file": Policy(roles(L, S)),
    "api_release_archive": Policy(roles(L, S)),
    "api_release_diff": Policy(roles(L, S)),
    "api_export_start": Policy(roles(L), P),
    # evaluation: model identities on every page, so leads and researchers only
    "evaluation_leaderboard": Policy(roles(L, S)),
    "evaluation_submit": Policy(roles(L, S), P),
    "evaluation_run": Policy(roles(L), P),
    "evaluation_compare": Policy(roles(L, S), query={"a": "submission", "b": "submission"}),
    "evaluation_submission": Policy(roles(L, S)),
    "api_evaluations": Policy(roles(L, S), GP),
    "api_leaderboard_csv": Policy(roles(L, S)),
    "api_evaluations_compare": Policy(roles(L, S), query={"a": "submission", "b": "submission"}),
    "api_evaluation": Policy(roles(L, S)),
    # VIKR judges and calibration (issue 15): leads start judges and upload human labels;
    # researchers read the judged predictions and the calibration report.
    "evaluation_judge": Policy(roles(L), P),
    "evaluation_calibration": Policy(roles(L), P),
    "evaluation_predictions": Policy(roles(L, S)),
    "api_evaluation_judge": Policy(roles(L), P),
    "api_evaluation_calibration": Policy({"GET": roles(L, S), "POST": roles(L)}, GP),
    "api_evaluation_predictions": Policy(roles(L, S)),
    # the model stages of a workflow (vikr conversion): the leads'
    "conversions_page": Policy(roles(L), GP),
    "api_conversions": Policy(roles(L)),
    "api_conversions_retry": Policy(roles(L), P),
    "api_conversion": Policy(roles(L)),
    "api_export_job": Policy(roles(L), ids={"job_id": "export_job"}),
    # quality (anchoring names models and annotators: leads only)
    "quality_dashboard": Policy(roles(L)),
    "quality_agreement": Policy(roles(L, S)),
    "quality_agreement_json": Policy(roles(L, S)),
    "quality_agreement_csv": Policy(roles(L, S)),
    "quality_agreement_compute": Policy(roles(L), P),
    "quality_audits": Policy({"GET": roles(L, S), "POST": roles(L)}, GP),
    "quality_audit": Policy(roles(L, S)),
    "quality_audit_json": Policy(roles(L, S)),
    "quality_audit_csv": Policy(roles(L, S)),
    "quality_anchoring": Policy(roles(L)),
    "quality_anchoring_json": Policy(roles(L)),
    "quality_anchoring_csv": Policy(roles(L)),
    "api_quality_agreement": Policy(roles(L, S)),
    "api_quality_agreement_job_start": Policy(roles(L), P),
    "api_quality_agreement_job": Policy(roles(L)),
    "api_quality_audits": Policy(roles(L, S)),
    "api_quality_audit_create": Policy(roles(L), P),
    "api_quality_audit": Policy(roles(L, S)),
    "api_quality_anchoring": Policy(roles(L)),
    # reference-independence study (studies): the pages and actions are the leads'; a
    # participant's page is theirs alone (another participant's: 403), a judge's the judge's,
    # an adjudication page a lead's or reviewer's not involved with the item
    "studies_home": Policy(roles(L, R, A, S)),
    "study_new": Policy(roles(L), P),
    "study_page": Policy(roles(L)),
    "study_action": Policy(roles(L), P),
    "study_item_image": Policy(roles(L, R)),
    "study_item_action": Policy(roles(L), P, ids={"action": "study_item_action"}),
    "study_reexplain_next": Policy(roles(A, R), P),
    "study_reexplain": Policy(roles(A), GP),
    "study_reexplain_image": Policy(roles(A)),
    "study_judge_next": Policy(roles(L, R, A), P),
    "study_judge": Policy(roles(R), GP, ids={"reexplanation_id": "reexplanation_judged"}),
    "study_adjudicate_next": Policy(roles(L, R)),
    "study_adjudicate": Policy(roles(L), GP, ids={"study_item_id": "study_item_conflict"}),
    "api_studies": Policy({"GET": roles(L, S), "POST": roles(L)}, GP),
    "api_study": Policy(roles(L, S)),
    "api_study_confirm": Policy(roles(L), P),
    "api_study_report": Policy(roles(L, S)),
    "api_study_reexplain_next": Policy(roles(A, R), P),
    "api_study_reexplanation": Policy(roles(A), GP),
    # Django's admin: staff only, every pattern of its namespace (one per registered model)
    "admin:*": Policy(STAFF),
    "admin:login": Policy(PUBLIC, GP),
    "admin:logout": Policy(PUBLIC, P),
}

#: URL kwarg -> world.ids key, unless the policy says otherwise.
DEFAULT_IDS = {
    "item_id": "item_gold",
    "task_id": "task_open",
    "audit_id": "audit",
    "report_id": "report",
    "number": "release",
    "other": "release",
    "name": "release_file",
    "provider_id": "provider",
    "pair_id": "pair",
    "kind": "job_kind",
    "record_id": "gold_decided",
    "variant": "variant_kind",
    "submission_id": "submission",
    "version": "guideline_version",
    "study_id": "study",
    "study_item_id": "study_item",
    "reexplanation_id": "reexplanation_own",
    "action": "study_action",
    "conversion_id": "conversion",
}
#: Kwargs that number objects within a project (release v1 of every project): they cannot
#: name another project's object, so the "foreign ids" request keeps the own value.
PROJECT_SCOPED = {"number", "other", "name", "kind", "variant", "version", "action"}
#: Admin kwargs (no project): any value, the view must refuse before looking.
ADMIN_KWARGS = {"object_id": "1", "id": "1", "content_type_id": "1", "app_label": "projects", "url": "anything/"}


@dataclass(frozen=True)
class Route:
    key: str  # policy key: URL name (with namespace) or, if unnamed, the route
    segments: tuple  # the pattern objects from the root to the endpoint
    params: tuple[str, ...]

    @property
    def namespace(self) -> str | None:
        return self.key.split(":", 1)[0] if ":" in self.key else None

    def path(self, kwargs: dict) -> str:
        out = "/"
        for pattern in self.segments:
            if isinstance(pattern, RoutePattern):
                out += re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(kwargs[m.group(1)]), str(pattern))
            elif isinstance(pattern, RegexPattern):
                out += re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: str(kwargs[m.group(1)]), pattern._regex).strip("^$")
        return out

    @property
    def api(self) -> bool:
        return self.path(dict.fromkeys(self.params, 1)).startswith("/api/")

    def schema_path(self) -> str:
        return self.path({p: "{" + p + "}" for p in self.params})


def routes(patterns=None, segments=(), namespace=None) -> list[Route]:
    found = []
    for p in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(p, URLResolver):
            found += routes(p.url_patterns, (*segments, p.pattern), p.namespace or namespace)
        elif isinstance(p, URLPattern):
            segs = (*segments, p.pattern)
            name = p.name or "".join(str(s) for s in segs)
            key = f"{namespace}:{name}" if namespace else name
            params = tuple(a or b for s in segs for a, b in re.findall(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>", str(s)))
            found.append(Route(key, segs, params))
    return found


def policy_of(route: Route) -> Policy | None:
    if route.key in POLICY:
        return POLICY[route.key]
    if route.namespace:
        return POLICY.get(f"{route.namespace}:*")
    return None


def test_every_url_pattern_has_a_policy():
    """A new URL must say who may call it before anything else is tested."""
    missing = sorted(r.key for r in routes() if policy_of(r) is None)
    assert not missing, f"URL patterns without a policy in POLICY: {missing}"
    stale = sorted(set(POLICY) - {r.key for r in routes()} - {k for k in POLICY if k.endswith(":*")})
    assert not stale, f"policies of URLs that no longer exist: {stale}"


def test_the_openapi_schema_and_the_resolver_name_the_same_api(client):
    """Each API operation of the schema is a URL pattern with a policy and the same methods."""
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    api = {r.schema_path(): r for r in routes() if r.api and r.key not in ("api_schema", "api_docs")}
    assert set(schema) == set(api), sorted(set(schema) ^ set(api))
    for path, ops in schema.items():
        declared = {m.upper() for m in ops if m in ("get", "post", "put", "patch", "delete")}
        assert declared == set(policy_of(api[path]).methods), (path, declared, policy_of(api[path]).methods)


@dataclass
class Persona:
    name: str
    user: object | None
    roles: frozenset[str]  # roles in the own project


def _kwargs(route: Route, policy: Policy, own: World, ids_from: World, slug: str) -> dict | None:
    kwargs = {}
    for p in route.params:
        if p == "slug":
            kwargs[p] = slug
        elif route.namespace == "admin":
            kwargs[p] = ADMIN_KWARGS[p]
        else:
            key = policy.ids.get(p) or DEFAULT_IDS[p]
            kwargs[p] = (own if p in PROJECT_SCOPED else ids_from).ids[key]
    return kwargs


def _is_login_redirect(r, login: str = "/accounts/login/") -> bool:
    return r.status_code == 302 and r["Location"].startswith(login)


REFUSED = {401, 403, 404, 405}


def test_authorization_matrix(world: World, foreign: World):
    personas = [Persona("anonymous", None, frozenset()), Persona("outsider", foreign.users["lead"], frozenset())]
    personas += [Persona(role, world.users[role], frozenset([role])) for role in ROLES]
    api_schema = Client().get("/api/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    errors: list[str] = []
    requests = 0

    clients: dict[str, Client] = {}

    def client_of(persona: Persona) -> Client:
        """One logged-in client per persona (a login per request was most of this test's time),
        logged in again whenever a request ended its session (logout)."""
        c = clients.get(persona.name)
        if c is None or (persona.user is not None and "_auth_user_id" not in c.session):
            c = Client(raise_request_exception=False)
            if persona.user is not None:
                c.force_login(persona.user)
            clients[persona.name] = c
        return c

    def check(route: Route, method: str, persona: Persona, target: str, url: str, expected: str | set[int]):
        nonlocal requests
        route_policy = policy_of(route)
        c = client_of(persona)
        if persona.user is None:
            c.cookies.clear()  # anonymous stays anonymous (a login route may have set a session)
        send = c.get if method == "GET" else c.post
        r = send(url, content_type="application/json") if method == "POST" and route.api else send(url)
        requests += 1
        where = f"{method} {url} [{route.key}] as {persona.name} ({target}): {r.status_code}"
        status = r.status_code
        if status >= 500:
            errors.append(f"{where}: server error")
        elif expected == "allowed":
            login_page = _is_login_redirect(r) or _is_login_redirect(r, "/admin/login/")
            if status in REFUSED or (login_page and route_policy.who != PUBLIC):  # logout ends on the login page
                errors.append(f"{where}: refused, but the policy allows it")
        elif 200 <= status < 300:
            errors.append(
                f"{where}: 2xx where {sorted(expected) if isinstance(expected, set) else expected} was expected"
            )
        elif expected == "login":
            if not (_is_login_redirect(r) if not route.api else status in (401, 403)):
                errors.append(f"{where}: expected the login page (or 401 for the API)")
        elif expected == "admin-login":
            if not (status in (301, 302) and r["Location"].startswith("/admin/")):
                errors.append(f"{where}: expected a redirect to the admin login")
        elif status not in expected:
            errors.append(f"{where}: expected {sorted(expected)}")
        if route.api and route.key not in ("api_schema", "api_docs"):
            documented = api_schema.get(route.schema_path(), {}).get(method.lower(), {}).get("responses", {})
            if str(status) not in documented:
                errors.append(f"{where}: status not in the OpenAPI schema ({sorted(documented)})")

    for route in routes():
        policy = policy_of(route)
        if policy is None:
            continue  # test_every_url_pattern_has_a_policy reports it
        project_scoped = "slug" in route.params
        for method in policy.methods:
            who = policy.allowed(method)
            for persona in personas:
                # Targets: own slug + own ids; own slug + foreign ids; foreign slug + foreign ids.
                targets = [("own", world, world.project.slug)]
                if project_scoped:
                    if set(route.params) - {"slug"} - PROJECT_SCOPED:
                        targets.append(("own slug, foreign ids", foreign, world.project.slug))
                    if persona.name != "outsider":
                        targets.append(("foreign", foreign, foreign.project.slug))
                for target, ids_from, slug in targets:
                    kwargs = _kwargs(route, policy, world, ids_from, slug)
                    query = "&".join(f"{k}={world.ids[v]}" for k, v in policy.query.items())
                    url = route.path(kwargs) + (f"?{query}" if query else "")
                    if who == PUBLIC:
                        expected = "allowed"
                    elif persona.user is None:
                        expected = "admin-login" if who == STAFF else "login"
                    elif who == STAFF:
                        expected = "admin-login"
                    elif who == AUTHENTICATED:
                        expected = "allowed"
                    elif who == GRANTED:
                        expected = {403}
                    elif persona.name == "outsider" or target == "foreign":
                        expected = {404}  # not a member: the project's existence is not revealed
                    elif who != MEMBER and not (persona.roles & who):
                        expected = {403, 404} if target != "own" else {403}
                    elif target == "own":
                        expected = "allowed"
                    else:
                        expected = {404}  # another project's object under this project's slug
                    check(route, method, persona, target, url, expected)
    assert requests > 1500, requests
    assert not errors, f"{len(errors)} of {requests} requests broke the policy:\n" + "\n".join(errors[:80])
