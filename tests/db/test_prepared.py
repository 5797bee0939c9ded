"""The claim read and claim statement on PostgreSQL's server-binding cursor
(``weft_django.db.postgresql.prepared``).

Invariants protected:
- prepared or not is the connection's ``prepare_threshold`` (Django's
  default ``None`` prepares nothing: transaction pooling keeps working);
- nothing observable is lost by leaving Django's cursor: every
  ``execute_wrapper`` sees the statements, a query log (``DEBUG``,
  ``CaptureQueriesContext``) records them, and a driver error arrives as a
  ``django.db.DatabaseError`` whose ``__cause__`` carries the ``sqlstate``;
- the transitions stay what they were: CAS results, one event per transition.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import DatabaseError, connection, connections, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from tests.support import ManualClock
from weft_django.db.postgresql import prepared
from weft_django.models import ClaimEvent, WorkflowClaim
from weft_django.ownership.registry import ClaimRegistry

pytestmark = [
    pytest.mark.usefixtures("batch_db"),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's cursor"),
]


@pytest.fixture
def registry() -> ClaimRegistry:
    return ClaimRegistry(
        engine_id="prep-engine",
        clock=ManualClock(1_000_000),
        claim_ttl_ms=30_000,
        claim_renew_interval_ms=5_000,
    )


@pytest.fixture
def threshold() -> Iterator[Any]:
    """Set the live connection's ``prepare_threshold``; restored afterwards."""
    connection.ensure_connection()
    raw = connection.connection
    before = raw.prepare_threshold

    def set_to(value: int | None) -> None:
        raw.prepare_threshold = value

    yield set_to
    raw.prepare_threshold = before


def _prepared_claim_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        rows = [r[0] for r in cursor.fetchall()]
    return [s for s in rows if WorkflowClaim._meta.db_table in s]


def _cycle(registry: ClaimRegistry, workflow_id: str, times: int) -> None:
    for _ in range(times):
        assert registry.acquire(workflow_id).status == "acquired"
        assert registry.release(workflow_id).status == "released"


def test_a_threshold_prepares_the_claim_statements(registry: ClaimRegistry, threshold) -> None:
    threshold(0)  # prepare at the first execution
    _cycle(registry, "prep-1", 2)
    statements = _prepared_claim_statements()
    assert any(s.startswith("SELECT epoch") for s in statements), statements
    assert any("INSERT INTO" in s and "ClaimEvent".lower() in s.lower() for s in statements)
    assert ClaimEvent.objects.filter(workflow_id="prep-1").count() == 4


def test_djangos_default_prepares_nothing(registry: ClaimRegistry, threshold) -> None:
    threshold(None)
    _cycle(registry, "prep-2", 6)  # beyond psycopg's default threshold of 5
    assert _prepared_claim_statements() == []
    claim = WorkflowClaim.objects.get(pk="prep-2")
    assert (claim.epoch, claim.engine_id) == (6, None)


def test_every_execute_wrapper_sees_the_statements(registry: ClaimRegistry) -> None:
    seen: list[str] = []

    def spy(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        assert context["connection"] is connections["default"]
        return execute(sql, params, many, context)

    # A session opened inside the window would add its set-up (an engine
    # thread's idle-transaction bound, when an earlier test of this process
    # marked this thread): open it first, so only the cycle is seen.
    connection.ensure_connection()
    with connection.execute_wrapper(spy):
        _cycle(registry, "prep-3", 1)
    assert len(seen) == 3  # the read, the acquire CAS, the release CAS
    assert seen[0].startswith("SELECT epoch")
    assert all(s.startswith("WITH c AS (") and "weft_claimevent" in s for s in seen[1:])


def test_a_query_log_records_the_statements(registry: ClaimRegistry) -> None:
    with CaptureQueriesContext(connection) as queries:
        _cycle(registry, "prep-4", 1)
    assert len(queries.captured_queries) == 3
    assert "prep-4" in queries.captured_queries[0]["sql"]


def test_a_driver_error_is_djangos_with_the_sqlstate() -> None:
    with pytest.raises(DatabaseError) as raised:
        prepared.fetchone("default", "SELECT 1 FROM no_such_weft_table WHERE x = %s", [1])
    assert getattr(raised.value.__cause__, "sqlstate", None) == "42P01"
    # The connection stays usable (autocommit: nothing to roll back).
    assert prepared.fetchone("default", "SELECT %s::int + 1", [1]) == (2,)


def test_a_reconnect_gets_a_fresh_cursor() -> None:
    assert prepared.fetchone("default", "SELECT %s::text", ["a"]) == ("a",)
    connection.close()
    assert prepared.fetchone("default", "SELECT %s::text", ["b"]) == ("b",)


def test_without_execute_wrappers_a_broken_transaction_is_still_refused() -> None:
    """The path with no hook to call keeps Django's checks: after an error
    inside ``atomic``, the next statement is refused before it is sent."""
    assert not connection.execute_wrappers
    with transaction.atomic():
        with pytest.raises(DatabaseError):
            prepared.fetchone("default", "SELECT 1 FROM no_such_weft_table WHERE x = %s", [1])
        connection.needs_rollback = True  # what atomic sets on an error it sees
        with pytest.raises(TransactionManagementError):
            prepared.fetchone("default", "SELECT %s::int", [1])
        transaction.set_rollback(True)
    assert prepared.fetchone("default", "SELECT %s::int", [3]) == (3,)
