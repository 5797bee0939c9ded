"""Engine threads keep their connection across turns and bound idle transactions.

Why: ``close_old_connections()`` opened a new PostgreSQL session per turn
under the default ``CONN_MAX_AGE = 0`` (issue #7), and an engine cut off
inside a batch left its row locks held until TCP gave up (issue #8's soak).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, connections

from tests.support import db_session_id
from weft_django.engine.db_connections import mark_engine_thread, refresh_connections

pytestmark = pytest.mark.django_db(transaction=True)


def _in_thread(fn: Any) -> Any:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # surfaced in the test thread
            box["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_refresh_keeps_a_healthy_connection_where_close_old_connections_would_not() -> None:
    from django.db import close_old_connections

    def with_refresh() -> bool:
        assert connection.settings_dict["CONN_MAX_AGE"] == 0  # Django's default
        first = db_session_id()
        refresh_connections()
        return db_session_id() == first

    def with_close_old_connections() -> bool:
        db_session_id()
        close_old_connections()  # what the engine did before every turn
        return connection.connection is None

    assert _in_thread(with_refresh)
    assert _in_thread(with_close_old_connections)


def test_refresh_drops_a_connection_that_failed_and_no_longer_answers() -> None:
    def turns() -> bool:
        db_session_id()
        connection.errors_occurred = True
        connection.is_usable = lambda: False  # type: ignore[method-assign]
        refresh_connections()
        return connection.connection is None

    assert _in_thread(turns)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL session setting")
def test_engine_threads_bound_idle_transactions_to_the_claim_ttl_and_others_do_not() -> None:
    def show() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW idle_in_transaction_session_timeout")
            return str(cursor.fetchone()[0])

    def engine_thread() -> tuple[str, str, str]:
        before = show()  # a connection opened before the thread was marked ...
        mark_engine_thread(3_000)
        after = show()  # ... is bounded when it is marked,
        connections.close_all()
        return before, after, show()  # and so is every new one.

    assert _in_thread(show) == "0"  # an ordinary (web, test) thread: untouched
    assert _in_thread(engine_thread) == ("0", "3s", "3s")
