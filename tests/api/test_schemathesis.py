"""Property-based fuzzing of the whole API from its own OpenAPI schema.

Why: SPEC §5 promises that a bad body is a 400 and never a 500. Hand-written
cases cover the inputs we thought of; schemathesis generates the rest --
positive and negative data for every path parameter, query parameter and
body -- from the schema the app serves (``GET /api/schema/``), so the
schema and the views are checked together: no 5xx, no status the schema
does not list for the operation, and every response matches its documented
media type and body.

One test (one database flush: ``transaction=True`` truncates every table
afterwards, which dominates on PostgreSQL) with a subtest per operation and
generation mode, each driven by ``APIOperation.as_strategy`` under
Hypothesis (bounded examples, no deadline, derandomized so a run is
repeatable). schemathesis' lazy ``from_fixture`` pytest integration is not
used: it relies on a private pytest attribute (``Node._nodeid``) that
pytest 9 removed.

Marked ``fuzz``: it runs once, on PostgreSQL (``-m fuzz``); the SQLite leg
of the fast suite deselects it (``-m "not processes and not fuzz"``).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api import workflows as _workflows  # noqa: F401  (registers the api-* workflows)
from tests.api.test_schema import EXPECTED

#: Examples per operation, split between positive and negative data; raise it
#: (WEFT_FUZZ_EXAMPLES=500) for a deeper run. 25 keeps the test near 30 s of CPU.
MAX_EXAMPLES = int(os.environ.get("WEFT_FUZZ_EXAMPLES", "25"))
BUDGET = {
    GenerationMode.POSITIVE: MAX_EXAMPLES // 2,
    GenerationMode.NEGATIVE: MAX_EXAMPLES - MAX_EXAMPLES // 2,
}
USERNAME, PASSWORD = "fuzz", "fuzz-pw"
AUTH = {"Authorization": "Basic " + base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()}

#: Short ids that generated path parameters often hit, so the fuzzer also
#: reaches past the 404 into pending, parked-less, cancelled and suspended runs.
SEEDED_IDS = ["0", "00", "A", "a", "-", "_", ":", "@", "0-0", "AAA"]

#: Not fuzzed: the Server-Sent Events stream answers a body that lasts as long
#: as the run (a pending seeded run never ends it); tests/api/test_published.py
#: covers its bad input.
NOT_FUZZED = {("/api/weft/workflows/{workflow_id}/streams/{key}/", "get")}
OPERATIONS = sorted(EXPECTED - NOT_FUZZED)
#: No 5xx; no status the operation does not document; every documented
#: response with its documented media type and body.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
_loaded: list[Any] = []


def _schema() -> Any:
    """The schema served by the app, loaded once per session (it needs no database)."""
    if not _loaded:
        from project.wsgi import application

        _loaded.append(schemathesis.openapi.from_wsgi("/api/schema/?format=json", application))
    return _loaded[0]


@pytest.fixture
def seeded(django_user_model: Any, settings: Any, monkeypatch: Any) -> Iterator[None]:
    from weft_django import client
    from weft_django.api.views import published

    # A generated ?wait= would hold each example up to 30 s: a short bound
    # instead (a longer wait is then the 400 the bound answers).
    monkeypatch.setattr(published, "MAX_EVENT_WAIT_S", 0.05)

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    django_user_model.objects.create_superuser(USERNAME, password=PASSWORD)
    for workflow_id in SEEDED_IDS:
        client.start("api-signal", {"n": 1}, workflow_id=workflow_id)
    client.cancel("0", reason="fuzz")
    client.suspend("A")
    # Keep one connection for the whole test, as Django's test client does: the
    # WSGI handler would otherwise close it after every request (CONN_MAX_AGE=0)
    # and reconnect on the next, which dominates the run time on PostgreSQL.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.mark.fuzz
@pytest.mark.django_db(transaction=True)
def test_no_input_makes_a_server_error(seeded: None, subtests: pytest.Subtests) -> None:
    schema = _schema()
    for path, method in OPERATIONS:
        operation = schema[path][method.upper()]
        for mode, examples in BUDGET.items():
            with subtests.test(msg=f"{method.upper()} {path} ({mode.value})"):
                _fuzz(operation, mode, examples)


def _fuzz(operation: Any, mode: GenerationMode, examples: int) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def run(case: Any) -> None:
        response = case.call(headers=AUTH)
        case.validate_response(response, checks=CHECKS)

    run()
