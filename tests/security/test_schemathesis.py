"""No 500 under fuzzing, and every status an endpoint returns is documented (issue item 3).

schemathesis reads the app's own ``/api/schema/`` (in process, through the WSGI app) and sends
generated requests to every operation with a lead's, a researcher's and an annotator's token:
its examples, coverage (boundary values: negative, huge, malformed) and fuzzing phases, with a
fixed seed and few examples per operation so the three runs stay within a few minutes.
Checks: ``not_a_server_error`` (no 5xx) and ``status_code_conformance`` (no status code the
schema does not list for that operation).

Path parameters are either the generated ones (mostly unknown ids: 404) or the world's real
slug and ids, so requests also reach the views' inner code paths.

Before the fixes it failed on 31 of 32 operations for the lead (undocumented 400/401/403/404/
409), and on the paginated lists for every role: ``limit=99999999999999999999`` overflowed
the LIMIT clause (500). The issue's own example (``limit=-46565&offset=1152921504606846976``)
is replayed too; here it answered 200 with a silently replaced limit, now 400.
"""

from __future__ import annotations

import hypothesis
import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

from .world import World, build_world

SEED = 20261201
ROLES = ["lead", "researcher", "annotator"]


def _real_path_parameters(world: World, path: str) -> dict[str, object]:
    """The world's own slug and ids for an operation's path parameters."""
    if "/imports/" in path:
        job = world.ids["import_job"]
    elif "/candidate-jobs/" in path:
        job = world.ids["candidate_job"]
    else:
        job = world.ids["export_job"]
    return {
        "slug": world.project.slug,
        "item_id": world.ids["item_held"],
        "job_id": job,
        "report_id": world.ids["report"],
        "audit_id": world.ids["audit"],
        "number": world.ids["release"],
        "other": world.ids["release"],
        "name": world.ids["release_file"],
    }


@pytest.fixture
def fuzz_world(db, tmp_path) -> World:
    return build_world("p1", tmp_path / "own")


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """Requests go through the real WSGI handler, whose request_started/finished signals close
    the database connection: inside the test's transaction (PostgreSQL) that would end it.
    Django's own test client disconnects them the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _load_schema(world: World):
    loaded = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())
    loaded.config.seed = SEED

    @loaded.hook
    def flatmap_path_parameters(context, path_parameters):
        real = {
            k: v
            for k, v in _real_path_parameters(world, context.operation.path).items()
            if k in (path_parameters or {})
        }
        return st.sampled_from([path_parameters, {**(path_parameters or {}), **real}])

    return loaded


def _settings(max_examples: int) -> hypothesis.settings:
    return hypothesis.settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )


#: Examples per operation in the fuzzing phase (the coverage phase adds its own boundary cases).
#: Operations with query parameters (pagination, filters) get more: the LIMIT overflow needed
#: about 30 to be found.
FEW, MORE = _settings(6), _settings(30)


#: Query strings of the issue's report: 500 for lead, researcher and annotator tokens.
REGRESSIONS = [
    {"limit": "-46565", "offset": "1152921504606846976"},
    {"limit": "99999999999999999999"},
    {"offset": "99999999999999999999999"},
]


def _summary(exc: BaseException) -> str:
    """The failure's title, status and curl line (schemathesis' own message is long)."""
    text = str(exc)
    if isinstance(exc, BaseExceptionGroup):
        text = "; ".join(f"{type(e).__name__}: {str(e).splitlines()[0]}" for e in exc.exceptions) + "\n" + str(exc)
    keep = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("Reproduce")]
    return "\n    ".join(keep[:14])


@pytest.mark.parametrize("role", ROLES)
def test_api_fuzz_no_server_error_and_only_documented_statuses(fuzz_world, role):
    """One schemathesis run per role over every operation (examples, coverage and fuzzing
    phases); every failing operation is reported, not only the first."""
    # get_all_tests builds the same per-operation Hypothesis tests as schemathesis'
    # ``@schema.parametrize()``, whose pytest wrapper does not run under pytest 9
    # ("'Function' object has no attribute '_nodeid'").
    from schemathesis.pytest.lazy import get_all_tests

    token, _ = Token.objects.get_or_create(user=fuzz_world.users[role])
    headers = {"Authorization": f"Token {token.key}"}
    calls = 0

    def check(case) -> None:
        nonlocal calls
        calls += 1
        case.call_and_validate(headers=headers, checks=[not_a_server_error, status_code_conformance])

    def tests(settings: hypothesis.settings) -> dict[str, tuple]:
        built = get_all_tests(schema=_load_schema(fuzz_world), test_func=check, settings=settings, given_kwargs=None)
        return {op.label: (op, test) for op, test in (r.ok() for r in built)}

    few, more = tests(FEW), tests(MORE)
    failures: list[str] = []
    operations = 0
    for label, (operation, test) in few.items():
        if len(operation.query):
            test = more[label][1]
        operations += 1
        try:
            test()
        except (Exception, BaseExceptionGroup) as exc:
            failures.append(f"{operation.label}: {exc}")
    # Cases reported in the issue (and the overflow they pointed at), replayed through the same
    # checks on every paginated list: generated data finds them only by chance.
    for label, (operation, _) in few.items():
        if {p.name for p in operation.query} >= {"limit", "offset"}:
            for query in REGRESSIONS:
                case = operation.Case(
                    query=query,
                    path_parameters=_real_path_parameters(fuzz_world, operation.path)
                    if operation.path_parameters
                    else None,
                )
                try:
                    check(case)
                except (Exception, BaseExceptionGroup) as exc:
                    failures.append(f"{label} {query}: {_summary(exc)}")
    assert not failures, f"{len(failures)} operation(s) failed for the {role}:\n\n" + "\n\n".join(failures)
    # The run was real: every operation of the schema, several cases each.
    assert operations >= 30 and calls >= 5 * operations, (operations, calls)
