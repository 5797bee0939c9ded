"""``weft_django.fencing.fenced_update`` on SQLite and PostgreSQL (issue #17 part 2).

Checked: a stale owner's write (epoch 3 after epoch 4 wrote) is refused and
the row keeps the newer value; the same epoch again applies (a retry); a
newer epoch applies; a row never fenced and a row last fenced by another
workflow apply; ``on_stale="raise"``; the bad inputs (outside an activity,
epoch 0, no fence fields, fence fields among the values, unsaved instance);
``F()`` values; the manager method; the inside-an-activity default; and two
threads racing (epochs 3 and 4, with the row locked by one of them on
PostgreSQL): the newer always wins.
"""

from __future__ import annotations

import pickle
import threading

import pytest
from django.db import connection, connections, transaction
from django.db.models import F

from project.demo.models import FencedAccount, SideEffect
from weft_django import ActivityInfo, StaleFenceError, afenced_update, fenced_update
from weft_django.engine.activities.info import activity_scope

pytestmark = pytest.mark.usefixtures("batch_db")


def fence(epoch: int, workflow_id: str = "order-1") -> ActivityInfo:
    return ActivityInfo(workflow_id, "run", 0, 1, epoch, f"{workflow_id}:0", None)


def account(**values: object) -> FencedAccount:
    return FencedAccount.objects.create(name="acme", **values)


def stored(row: FencedAccount) -> tuple[int, str, str, int]:
    row.refresh_from_db()
    return row.balance, row.writer, row.fence_workflow_id, row.fence_epoch


def test_a_row_never_fenced_takes_the_first_writers_fence():
    row = account(balance=100)
    assert fenced_update(row, info=fence(4), balance=110, writer="e4") == 1
    assert stored(row) == (110, "e4", "order-1", 4)


def test_a_stale_owners_write_is_refused_and_the_newer_value_stays():
    row = account(balance=100)
    assert fenced_update(row, info=fence(4), balance=110, writer="e4") == 1
    assert fenced_update(row, info=fence(3), balance=999, writer="e3") == 0
    assert stored(row) == (110, "e4", "order-1", 4)


def test_the_same_epoch_again_applies():
    row = account(balance=100)
    fenced_update(row, info=fence(4), balance=110, writer="e4 attempt 1")
    assert fenced_update(row, info=fence(4), balance=110, writer="e4 attempt 2") == 1
    assert stored(row) == (110, "e4 attempt 2", "order-1", 4)


def test_a_newer_epoch_applies_and_then_fences_the_older_ones_out():
    row = account(balance=100)
    fenced_update(row, info=fence(3), balance=105, writer="e3")
    assert fenced_update(row, info=fence(4), balance=110, writer="e4") == 1
    assert fenced_update(row, info=fence(3), balance=1, writer="e3 late") == 0
    assert stored(row) == (110, "e4", "order-1", 4)


def test_another_workflow_applies_and_takes_the_slot():
    row = account(balance=100)
    fenced_update(row, info=fence(7, "order-1"), balance=110, writer="o1")
    assert fenced_update(row, info=fence(1, "order-2"), balance=120, writer="o2") == 1
    assert stored(row) == (120, "o2", "order-2", 1)
    # order-2 is now the row's last writer: its stale epochs are refused
    fenced_update(row, info=fence(2, "order-2"), balance=130, writer="o2 e2")
    assert fenced_update(row, info=fence(1, "order-2"), balance=0, writer="o2 e1") == 0
    assert stored(row)[:2] == (130, "o2 e2")


def test_f_expressions_and_a_queryset_of_several_rows():
    a = FencedAccount.objects.create(name="a", balance=10)
    b = FencedAccount.objects.create(name="b", balance=20)
    fenced_update(b, info=fence(5), balance=25)
    both = FencedAccount.objects.filter(name__in=["a", "b"])
    # b is fenced at 5: epoch 4 writes only a
    assert fenced_update(both, info=fence(4), balance=F("balance") + 1) == 1
    assert (stored(a)[0], stored(b)[0]) == (11, 25)
    assert FencedAccount.objects.filter(name="a").fenced_update(info=fence(4), balance=0) == 1
    assert fenced_update(FencedAccount, info=fence(6), writer="all") == 2


def test_on_stale_raise_names_the_row_and_both_epochs():
    row = account(balance=100)
    fenced_update(row, info=fence(4), balance=110)
    with pytest.raises(StaleFenceError) as caught:
        fenced_update(row, info=fence(3), balance=0, on_stale="raise")
    error = caught.value
    assert (error.model, error.pk, error.epoch, error.stored_epoch) == (
        "demo.FencedAccount",
        row.pk,
        3,
        4,
    )
    assert "epoch 4" in str(error) and "epoch 3" in str(error) and '"order-1"' in str(error)
    assert error.as_dict()["code"] == "stale_fence"
    assert pickle.loads(pickle.dumps(error)).as_dict() == error.as_dict()
    assert stored(row)[0] == 110
    assert fenced_update(row, info=fence(4), balance=111, on_stale="raise") == 1


def test_inside_an_activity_the_fence_is_activity_info():
    row = account(balance=100)
    with activity_scope(fence(4)):
        assert fenced_update(row, balance=110) == 1
    with activity_scope(fence(3)):
        assert fenced_update(row, balance=0) == 0
    assert stored(row) == (110, "", "order-1", 4)


def test_outside_an_activity_without_info_is_a_clear_error():
    row = account()
    with pytest.raises(RuntimeError, match=r"outside a running activity without info="):
        fenced_update(row, balance=1)
    assert stored(row)[3] == 0


@pytest.mark.parametrize("epoch", [0, -1, True])
def test_an_epoch_below_one_is_refused_naming_it(epoch):
    with pytest.raises(ValueError, match=rf"claim epoch >= 1, got {epoch!r}"):
        fenced_update(account(), info=fence(epoch), balance=1)


def test_bad_targets_and_values_are_clear_errors():
    with pytest.raises(TypeError, match=r"demo.SideEffect has no fence_workflow_id, fence_epoch"):
        fenced_update(SideEffect.objects.all(), info=fence(1), key="x")
    with pytest.raises(ValueError, match=r"sets fence_epoch itself"):
        fenced_update(account(), info=fence(1), fence_epoch=9)
    with pytest.raises(ValueError, match=r"unsaved FencedAccount"):
        fenced_update(FencedAccount(name="new"), info=fence(1), balance=1)
    with pytest.raises(TypeError, match=r"not 'acme'"):
        fenced_update("acme", info=fence(1), balance=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"at least one field"):
        fenced_update(FencedAccount, info=fence(1))
    with pytest.raises(ValueError, match=r"on_stale must be"):
        fenced_update(FencedAccount, info=fence(1), on_stale="ignore", balance=1)  # type: ignore[arg-type]


def test_one_statement_no_read_before_the_write():
    from django.test.utils import CaptureQueriesContext

    row = account()
    with CaptureQueriesContext(connection) as queries:
        fenced_update(row, info=fence(2), balance=5)
    assert len(queries) == 1, [q["sql"] for q in queries]
    assert queries[0]["sql"].lstrip().upper().startswith("UPDATE")


@pytest.mark.parametrize("order", ["newer-first", "older-first"])
def test_two_threads_racing_the_newer_epoch_wins(order):
    """Two writers, epochs 3 and 4, start together; whichever lands first, the
    row ends with epoch 4's value. On PostgreSQL the first holds the row lock
    (its transaction open) while the second's UPDATE starts and waits on it:
    the waiting UPDATE re-checks the fence on the committed row."""
    row = account(balance=100)
    first, second = (4, 3) if order == "newer-first" else (3, 4)
    locked = threading.Event()
    results: dict[int, int] = {}
    errors: list[BaseException] = []
    writer_pids: list[int] = []

    def write(epoch: int, hold: bool) -> None:
        try:
            if connection.vendor == "postgresql":
                with connection.cursor() as cur:
                    cur.execute("SELECT pg_backend_pid()")
                    writer_pids.append(cur.fetchone()[0])
            with transaction.atomic():
                results[epoch] = fenced_update(
                    row, info=fence(epoch), balance=100 + epoch, writer=f"e{epoch}"
                )
                if hold:
                    locked.set()
                    # keep the row lock until the other writer is waiting on it
                    if connection.vendor == "postgresql":
                        _wait_for_a_lock_waiter()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            locked.set()
        finally:
            connections.close_all()

    holder = threading.Thread(target=write, args=(first, True))
    holder.start()
    assert locked.wait(10)
    waiter = threading.Thread(target=write, args=(second, False))
    waiter.start()
    holder.join(20)
    waiter.join(20)
    assert not errors, errors
    assert stored(row) == (104, "e4", "order-1", 4)
    assert results == {4: 1, 3: 0 if order == "newer-first" else 1}
    if connection.vendor == "postgresql":
        _wait_for_the_threads_sessions_to_end(writer_pids)


def _wait_for_a_lock_waiter() -> None:
    """On PostgreSQL: until another session waits on a lock (bounded).

    Asked inside the holder's open transaction, whose statistics snapshot
    would stay frozen: cleared before each look.
    """
    from tests.support import wait_for

    def waiting() -> bool:
        with connections["default"].cursor() as cur:
            cur.execute("SELECT pg_stat_clear_snapshot()")
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database() AND pid <> pg_backend_pid()"
            )
            row = cur.fetchone()
            return row is not None and row[0] > 0

    wait_for("the other writer to wait on the row lock", waiting, timeout=10)


def _wait_for_the_threads_sessions_to_end(pids: list[int]) -> None:
    """The writers closed their connections; their server sessions end a moment
    later -- before the test database is dropped. Only the writers' own
    sessions are waited for: other tests' long-lived sessions (LISTEN hubs)
    may still be open."""
    from tests.support import wait_for

    def gone() -> bool:
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids])
            row = cur.fetchone()
            return row is not None and row[0] == 0

    wait_for("the writer threads' sessions to end", gone, timeout=10)


def test_afenced_update_is_the_same_fence_awaited():
    from asgiref.sync import async_to_sync

    row = account(balance=100)
    assert async_to_sync(afenced_update)(row, info=fence(4), balance=110, writer="e4") == 1
    assert async_to_sync(afenced_update)(row, info=fence(3), balance=0, writer="e3") == 0
    with pytest.raises(StaleFenceError):
        async_to_sync(afenced_update)(row, info=fence(3), balance=0, on_stale="raise")
    with pytest.raises(RuntimeError, match=r"outside a running activity"):
        async_to_sync(afenced_update)(row, balance=0)
    assert stored(row) == (110, "e4", "order-1", 4)
