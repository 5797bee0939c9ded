"""Atomic activities (issue #17 part 1): ``@activity(atomic=True)``.

What could fail and is checked from durable rows (``Stock``, ``StockMove``,
``JournalEntry``): the body's rows and its journal entry land together; a
fence failure (a cancel overtaking the step, a takeover deposing the engine)
commits none of the body's rows; a retried attempt (a simulated
serialization failure) leaves exactly one application; a timeout rolls the
body back; and the definition-time refusals name the function.

SQLite admits one writer at a time: a cancel or a takeover cannot commit
while an atomic body's transaction is open (it waits for it), so the
"overtaken mid-body" interleaving is PostgreSQL's; on SQLite the deposed
case is an engine whose view of its claim is stale when the step begins.
"""

from __future__ import annotations

import threading
import time
import warnings
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError, connection
from django.db.models import F

from project.demo.models import Stock, StockMove
from tests.e2e.helpers import latest
from weft_django import activity, activity_info, client, workflow
from weft_django.engine import Engine
from weft_django.engine.activities.atomic import WeftAtomicOtherAliasWarning
from weft_django.errors import ActivityError
from weft_django.models import JournalEntry, WorkflowClaim

ENTERED = threading.Event()
RELEASE = threading.Event()
FAIL_ATTEMPTS: dict[str, int] = {}  # workflow id -> attempts that raise a serialization failure


def _take(sku: str, workflow_id: str, kind: str, delta: int) -> int:
    stock = Stock.objects.select_for_update().get(pk=sku)
    stock.quantity += delta
    stock.save(update_fields=["quantity"])
    StockMove.objects.create(sku=sku, workflow_id=workflow_id, kind=kind, delta=delta)
    return stock.quantity


@activity(name="atomic-reserve", atomic=True)
def reserve(sku: str) -> int:
    activity_info().heartbeat({"step": "reserving"})  # allowed; writes nothing
    return _take(sku, activity_info().workflow_id, "reserve", -1)


@activity(name="atomic-reserve-gated", atomic=True)
def reserve_gated(sku: str) -> int:
    left = _take(sku, activity_info().workflow_id, "reserve", -1)
    ENTERED.set()
    assert RELEASE.wait(20), "the test never released the body"
    return left


@activity(name="atomic-reserve-flaky", atomic=True, retries=2, backoff=timedelta(seconds=1))
def reserve_flaky(sku: str) -> int:
    info = activity_info()
    left = _take(sku, info.workflow_id, "reserve", -1)
    if info.attempt <= FAIL_ATTEMPTS.get(info.workflow_id, 0):
        raise OperationalError("could not serialize access due to concurrent update")
    return left


@activity(name="atomic-reserve-slow", atomic=True, timeout=timedelta(milliseconds=200))
def reserve_slow(sku: str) -> int:
    left = _take(sku, activity_info().workflow_id, "reserve", -1)
    time.sleep(0.4)
    return left


@workflow(name="atomic-one")
def atomic_one(ctx, data):
    left = yield ctx.run(data.get("activity", "atomic-reserve"), data["sku"])
    return left


@workflow(name="atomic-then-wait")
def atomic_then_wait(ctx, data):
    left = yield ctx.run(data["activity"], data["sku"])
    yield ctx.wait_for_signal("go")
    return left


@workflow(name="atomic-caught")
def atomic_caught(ctx, data):
    try:
        yield ctx.run(data["activity"], data["sku"])
    except ActivityError as exc:
        return {"failed": exc.kind}
    return {"failed": None}


def _stock(sku: str, quantity: int = 99) -> None:
    Stock.objects.update_or_create(pk=sku, defaults={"quantity": quantity})


def _moves(workflow_id: str) -> int:
    return StockMove.objects.filter(workflow_id=workflow_id).count()


def _journal_targets(workflow_id: str) -> list[tuple[str, str]]:
    return list(
        JournalEntry.objects.filter(run=latest(workflow_id))
        .order_by("position")
        .values_list("kind", "target")
    )


@pytest.mark.django_db(transaction=True)
def test_rows_and_journal_entry_land_together(clock):
    _stock("a-1")
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start("atomic-one", {"sku": "a-1"}, workflow_id="atomic-1")
        engine.run_until_idle()
        assert handle.status() == "completed", handle.error()
    finally:
        engine.dispose(grace=0)
    assert Stock.objects.get(pk="a-1").quantity == 98
    assert _moves("atomic-1") == 1
    assert ("activity", "atomic-reserve") in _journal_targets("atomic-1")
    assert handle.result(timeout=1) == 98


def _drive_in_thread(engine: Engine) -> threading.Thread:
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            engine.run_until_idle()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=drive, name="test-engine")
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_cancel_overtaking_the_step_commits_nothing(clock):
    """PostgreSQL: the cancel commits while the body holds its row; the fence
    then fails and the body's writes roll back. SQLite: the cancel waits for
    the step's transaction, which commits first -- still exactly once."""
    ENTERED.clear()
    RELEASE.clear()
    _stock("a-2")
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start(
            "atomic-then-wait",
            {"sku": "a-2", "activity": "atomic-reserve-gated"},
            workflow_id="atomic-2",
        )
        driver = _drive_in_thread(engine)
        assert ENTERED.wait(20)
        if connection.vendor == "postgresql":
            client.cancel("atomic-2", reason="customer left")
            RELEASE.set()
        else:
            threading.Timer(0.3, RELEASE.set).start()
            client.cancel("atomic-2", reason="customer left")  # waits for the step
        driver.join(30)
        assert not driver.is_alive() and not driver.errors  # type: ignore[attr-defined]
        engine.run_until_idle()
    finally:
        RELEASE.set()
        engine.dispose(grace=0)
    assert handle.status() == "cancelled"
    if connection.vendor == "postgresql":
        assert Stock.objects.get(pk="a-2").quantity == 99
        assert _moves("atomic-2") == 0
        assert ("activity", "atomic-reserve-gated") not in _journal_targets("atomic-2")
    else:
        assert Stock.objects.get(pk="a-2").quantity == 98
        assert _moves("atomic-2") == 1
        assert ("activity", "atomic-reserve-gated") in _journal_targets("atomic-2")


@pytest.mark.django_db(transaction=True)
def test_a_deposed_engines_step_rolls_back(clock):
    """The claim moved to another engine while this one was paused (its memory
    still says it holds the old epoch): the step's body runs, the fence in its
    transaction fails, and nothing of it is left; the new owner applies it once."""
    _stock("a-3")
    FAIL_ATTEMPTS["atomic-3"] = 1  # attempt 1 fails: the run parks on its retry timer
    first = Engine("atomic-engine-a", clock=clock, background_tasks="manual").boot()
    second = Engine("atomic-engine-b", clock=clock, background_tasks="manual")
    try:
        handle = client.start(
            "atomic-one", {"sku": "a-3", "activity": "atomic-reserve-flaky"}, workflow_id="atomic-3"
        )
        first.run_until_idle()
        assert handle.status() == "parked", handle.error()
        assert (Stock.objects.get(pk="a-3").quantity, _moves("atomic-3")) == (99, 0)
        epoch = WorkflowClaim.objects.get(pk="atomic-3").epoch
        # What a takeover commits, while engine A is paused and does not know.
        WorkflowClaim.objects.filter(pk="atomic-3").update(
            epoch=F("epoch") + 1, engine_id="atomic-engine-b"
        )
        clock.advance(1_001)
        assert first.drive(latest("atomic-3").pk) is None  # deposed
        assert (Stock.objects.get(pk="a-3").quantity, _moves("atomic-3")) == (99, 0)
        assert first.registry is not None and first.registry.current_epoch("atomic-3") is None
        # The real new owner: once the claim (as B left it) expires, B takes over.
        WorkflowClaim.objects.filter(pk="atomic-3").update(engine_id=None, expires_at=0)
        second.boot()
        second.run_until_idle()
        assert handle.status() == "completed", handle.error()
    finally:
        second.dispose(grace=0)
        first.dispose(grace=0)
    assert WorkflowClaim.objects.get(pk="atomic-3").epoch > epoch
    assert Stock.objects.get(pk="a-3").quantity == 98
    assert _moves("atomic-3") == 1


@pytest.mark.django_db(transaction=True)
def test_a_serialization_failure_retries_and_applies_once(clock):
    _stock("a-4")
    FAIL_ATTEMPTS["atomic-4"] = 2
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start(
            "atomic-one", {"sku": "a-4", "activity": "atomic-reserve-flaky"}, workflow_id="atomic-4"
        )
        engine.run_until_idle()
        for _ in range(2):
            assert handle.status() == "parked", handle.error()
            assert _moves("atomic-4") == 0
            clock.advance(10_000)
            engine.run_until_idle()
        assert handle.status() == "completed", handle.error()
    finally:
        engine.dispose(grace=0)
    assert Stock.objects.get(pk="a-4").quantity == 98
    assert _moves("atomic-4") == 1
    assert handle.result(timeout=1) == 98


@pytest.mark.django_db(transaction=True)
def test_a_timeout_rolls_the_body_back(clock):
    _stock("a-5")
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start(
            "atomic-caught",
            {"sku": "a-5", "activity": "atomic-reserve-slow"},
            workflow_id="atomic-5",
        )
        engine.run_until_idle()
        assert handle.status() == "completed", handle.error()
    finally:
        engine.dispose(grace=0)
    assert handle.result(timeout=1) == {"failed": "timeout"}
    assert Stock.objects.get(pk="a-5").quantity == 99
    assert _moves("atomic-5") == 0


@activity(name="atomic-unrecordable", atomic=True, retries=3)
def reserve_unrecordable(sku: str) -> object:
    _take(sku, activity_info().workflow_id, "reserve", -1)
    return object()  # not a payload: the result cannot be journaled


@pytest.mark.django_db(transaction=True)
def test_a_result_that_cannot_be_journaled_rolls_the_body_back(clock):
    _stock("a-9")
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start(
            "atomic-caught",
            {"sku": "a-9", "activity": "atomic-unrecordable"},
            workflow_id="atomic-9",
        )
        engine.run_until_idle()
        assert handle.status() == "completed", handle.error()
    finally:
        engine.dispose(grace=0)
    assert handle.result(timeout=1) == {"failed": "non_retryable"}  # not retried
    assert (Stock.objects.get(pk="a-9").quantity, _moves("atomic-9")) == (99, 0)


@activity(name="atomic-blocked", atomic=True, timeout=timedelta(milliseconds=300))
def reserve_blocked(sku: str) -> int:
    return _take(sku, activity_info().workflow_id, "reserve", -1)


@pytest.mark.django_db(transaction=True)
def test_a_blocked_query_is_aborted_by_the_timeout_on_postgresql(clock):
    """Another session holds the row: the body's SELECT ... FOR UPDATE is
    cancelled by the statement timeout (the time left), not waited for."""
    if connection.vendor != "postgresql":
        pytest.skip("statement_timeout is PostgreSQL's; SQLite checks the deadline at commit")
    _stock("a-6")
    holder_ready, holder_done = threading.Event(), threading.Event()

    def hold_row() -> None:
        from django.db import connection as own
        from django.db import transaction

        with transaction.atomic():
            Stock.objects.select_for_update().get(pk="a-6")
            holder_ready.set()
            holder_done.wait(20)
        own.close()

    holder = threading.Thread(target=hold_row)
    holder.start()
    assert holder_ready.wait(10)
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start(
            "atomic-caught", {"sku": "a-6", "activity": "atomic-blocked"}, workflow_id="atomic-6"
        )
        started = time.monotonic()
        engine.run_until_idle()
        waited = time.monotonic() - started
        holder_done.set()
        assert handle.status() == "completed", handle.error()
    finally:
        holder_done.set()
        holder.join(10)
        engine.dispose(grace=0)
    assert handle.result(timeout=1) == {"failed": "timeout"}
    assert waited < 15  # hang protection: the holder would have kept it 20 s
    assert (Stock.objects.get(pk="a-6").quantity, _moves("atomic-6")) == (99, 0)


# ------------------------------------------------------------------ bad input


def test_atomic_on_an_async_def_is_refused_naming_it():
    async def pay(order: str) -> None:
        return None

    with pytest.raises(TypeError, match=r"'atomic-async'.*async def"):
        activity(name="atomic-async", atomic=True)(pay)


def test_atomic_with_a_heartbeat_timeout_is_refused():
    with pytest.raises(TypeError, match=r"'atomic-hb'.*heartbeat_timeout"):
        activity(name="atomic-hb", atomic=True, heartbeat_timeout=5)(lambda: None)


def test_atomic_on_another_alias_is_refused():
    with pytest.raises(ImproperlyConfigured, match=r"'atomic-other'.*using='reporting'.*'default'"):
        activity(name="atomic-other", atomic=True, using="reporting")(lambda: None)
    with pytest.raises(TypeError, match="using= only has a meaning with atomic=True"):
        activity(name="atomic-using", using="default")(lambda: None)
    with pytest.raises(TypeError, match="atomic must be True or False"):
        activity(name="atomic-str", atomic="yes")  # type: ignore[arg-type]
    activity(name="atomic-same", atomic=True, using="default")(lambda: None)  # the weft alias


@pytest.mark.django_db(transaction=True)
def test_a_write_through_another_alias_is_warned_once():
    """Seen from an atomic step on an alias "weft-only": "default" is the other one."""
    from weft_django.engine.activities import atomic as atomic_module

    atomic_module._warned.discard(("atomic-warned", "default"))
    with (
        pytest.warns(WeftAtomicOtherAliasWarning, match=r"atomic-warned.*default"),
        atomic_module._watch_other_aliases("weft-only", "atomic-warned"),
    ):
        list(Stock.objects.all())  # a read: not a write
        Stock.objects.create(sku="a-7", quantity=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with atomic_module._watch_other_aliases("weft-only", "atomic-warned"):
            Stock.objects.create(sku="a-8", quantity=1)  # once per activity and alias
        with atomic_module._watch_other_aliases("weft-only", "atomic-reads"):
            list(Stock.objects.all())
    assert connection.execute_wrappers == []


def test_the_other_alias_warning_names_activity_and_alias():
    warning = WeftAtomicOtherAliasWarning("reserve", "reporting")
    assert warning.fields() == {"activity": "reserve", "alias": "reporting"}
    assert "not exactly-once" in str(warning)


@activity(name="atomic-count", atomic=True)
def zero_stock(sku: str) -> int:
    return Stock.objects.filter(pk=sku).update(quantity=0)


@pytest.mark.django_db(transaction=True)
def test_the_body_and_its_journal_entry_are_one_transaction_of_known_cost(clock):
    """PostgreSQL's statement log of the turn thread: the body's UPDATE, the
    fence, and the journal INSERT with the run UPDATE (one statement) sit
    between one BEGIN and one COMMIT -- and nothing else does (the statements
    an atomic step costs)."""
    if connection.vendor != "postgresql":
        pytest.skip("Django logs BEGIN/COMMIT as statements on PostgreSQL")
    from django.test.utils import CaptureQueriesContext

    _stock("a-10")
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        engine.run_until_idle()
        handle = client.start(
            "atomic-then-wait", {"sku": "a-10", "activity": "atomic-count"}, workflow_id="atomic-10"
        )
        with CaptureQueriesContext(connection) as captured:
            engine.run_until_idle()
        assert handle.status() == "parked", handle.error()
    finally:
        engine.dispose(grace=0)
    sql = [q["sql"] for q in captured.captured_queries]
    body = next(i for i, s in enumerate(sql) if s.startswith('UPDATE "demo_stock"'))
    begin = max(i for i in range(body) if sql[i] == "BEGIN")
    commit = next(i for i in range(body, len(sql)) if sql[i] == "COMMIT")
    transaction_sql = sql[begin + 1 : commit]
    assert [s.split(" ", 1)[0] for s in transaction_sql] == [
        "UPDATE",  # the body
        "SAVEPOINT",  # the nested fenced batch
        "WITH",  # the fence: claim and run locked together, then compared
        "WITH",  # the journal entry of the result and the run's new state, one statement
        "RELEASE",
    ], transaction_sql
    assert 'INTO "weft_journalentry"' in transaction_sql[3]
    assert 'UPDATE "weft_workflowrun"' in transaction_sql[3]
    assert (Stock.objects.get(pk="a-10").quantity, handle.status()) == (0, "parked")
