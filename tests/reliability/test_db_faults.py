"""Database faults and hostile stored values against the claim protocol.

Invariants protected:
- a database error during renewal propagates and leaves the claims exactly
  as they were (tracked holders, rows, cooldowns, counters; no warning), and
  the next ``renew_all`` after ``close_if_unusable_or_obsolete`` succeeds
  (SPEC §4.4 "renew") -- with a real broken connection on PostgreSQL (the
  backend terminated by the server, the DBAPI connection closed under
  Django) and a failing statement on both databases;
- a deadlock, serialization failure or lock timeout inside a batch is
  retried and the batch commits exactly once (SPEC §4.2) -- simulated from
  inside the batch, and provoked for real with a row (PostgreSQL) or write
  (SQLite) lock held by another connection;
- the wake guard's re-read failing means ``proceed``, and the fenced write
  that follows is the real backstop (SPEC §4.7);
- corrupt values in every ownership table -- ``WorkflowClaim`` (half-null,
  negative, huge), ``OwnershipModeMarker`` (unknown mode, bad timestamp),
  ``GlobalLease`` (garbage holder, out-of-range epoch) -- never crash a
  reader and fail closed (SPEC §4.1): a corrupt holder is never "me", never
  live, never renewed back; a corrupt marker is an error, never re-stamped;
  an epoch that cannot be incremented safely is refused explicitly.
"""

from __future__ import annotations

import contextlib
import io
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import DatabaseError, OperationalError, connection
from django.db.models import F
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support import ManualClock, StaticHost
from weft_django.errors import EngineDeposedError, OwnershipModeMismatchError
from weft_django.inspection import claim_state, cluster_status
from weft_django.models import (
    ClaimEvent,
    GlobalLease,
    OwnershipModeMarker,
    WorkflowClaim,
    WorkflowRun,
)
from weft_django.ownership import batch as batch_module
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.codec import MAX_EPOCH_EXCLUSIVE, decode_holder_row
from weft_django.ownership.fence import fenced_commit
from weft_django.ownership.gates import check_mode_marker
from weft_django.ownership.guard import confirm_wake_ownership, wake_ownership_check
from weft_django.ownership.lease import GlobalLeaseManager
from weft_django.ownership.ops import Update
from weft_django.ownership.registry import ClaimRegistry
from weft_django.ownership.transitions import EpochExhaustedError, build_acquire, build_rotation
from weft_django.warnings import WeftWarning

pytestmark = pytest.mark.django_db(transaction=True)

TTL = 30_000
RENEW = 5_000
GRACE = 2 * RENEW
FAR = 10**12
BIGINT_MAX = 2**63 - 1
BIGINT_MIN = -(2**63)


def _columns(workflow_id: str) -> tuple:
    row = WorkflowClaim.objects.get(pk=workflow_id)
    return (row.epoch, row.engine_id, row.expires_at, row.claimed_at)


def _events(workflow_id: str) -> list[tuple[str, int, str]]:
    return list(
        ClaimEvent.objects.filter(workflow_id=workflow_id)
        .order_by("id")
        .values_list("kind", "epoch", "engine_id")
    )


def _pg_admin_connection():  # pragma: no cover - PostgreSQL only
    import psycopg

    s = connection.settings_dict
    return psycopg.connect(
        host=s["HOST"],
        port=s["PORT"],
        user=s["USER"],
        password=s["PASSWORD"] or None,
        dbname=s["NAME"],
        autocommit=True,
    )


# -- connection faults -----------------------------------------------------------------


@contextlib.contextmanager
def _failing_statements() -> Iterator[None]:
    """Every statement fails as a dropped connection does (any database)."""

    def fail(execute, sql, params, many, context):
        raise OperationalError("server closed the connection unexpectedly")

    with connection.execute_wrapper(fail):
        yield


@contextlib.contextmanager
def _terminated_backend() -> Iterator[None]:
    """PostgreSQL: the server kills this connection's backend (an admin, a failover)."""
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with _pg_admin_connection() as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        for _ in range(200):  # until the backend is really gone
            gone = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid]
            ).fetchone()
            if gone == (0,):
                break
            time.sleep(0.01)
    yield


@contextlib.contextmanager
def _closed_dbapi_connection() -> Iterator[None]:
    """PostgreSQL: the DBAPI connection is closed under Django."""
    connection.ensure_connection()
    connection.connection.close()
    yield


FAULTS: dict[str, tuple[Callable[[], contextlib.AbstractContextManager[None]], bool]] = {
    # name: (fault, needs PostgreSQL)
    "failing-statements": (_failing_statements, False),
    "terminated-backend": (_terminated_backend, True),
    "closed-dbapi-connection": (_closed_dbapi_connection, True),
}


@pytest.fixture(params=sorted(FAULTS))
def fault(request, vendor: str) -> Callable[[], contextlib.AbstractContextManager[None]]:
    make, needs_pg = FAULTS[request.param]
    if needs_pg and vendor != "postgresql":
        pytest.skip("a real broken connection needs PostgreSQL (SQLite has no socket)")
    return make


def _registry(engine_id: str, clock: ManualClock) -> ClaimRegistry:
    return ClaimRegistry(
        engine_id=engine_id, clock=clock, claim_ttl_ms=TTL, claim_renew_interval_ms=RENEW
    )


def test_a_broken_connection_during_renewal_propagates_and_keeps_the_claims(
    fault, clock: ManualClock
) -> None:
    registry = _registry("engine-a", clock)
    ids = ["wf-1", "wf-2", "wf-3"]
    for wf in ids:
        assert registry.acquire(wf).status == "acquired"
    holders = {wf: registry.holder(wf) for wf in ids}
    rows = {wf: _columns(wf) for wf in ids}
    clock.advance(RENEW)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with fault(), pytest.raises(DatabaseError):
            registry.renew_all()
    # Propagated, and nothing moved: no claim dropped, no cooldown, no loss counted.
    assert not [w for w in caught if issubclass(w.category, WeftWarning)]
    assert sorted(registry.tracked()) == ids
    assert {wf: registry.holder(wf) for wf in ids} == holders
    assert all(registry.holder(wf) is holders[wf] for wf in ids)
    assert registry.cooldown.active_ids(clock.now) == []
    snapshot = registry.metrics.snapshot()
    assert (snapshot.renewal_failures, snapshot.attempts["deposed"]) == (0, 0)

    connection.close_if_unusable_or_obsolete()
    assert {wf: _columns(wf) for wf in ids} == rows
    outcomes = registry.renew_all()
    assert sorted((o.workflow_id, o.status) for o in outcomes) == [(wf, "renewed") for wf in ids]
    assert {wf: _columns(wf)[2] for wf in ids} == dict.fromkeys(ids, clock.now + TTL)
    # The renewed claims still fence writes: the engine never stopped owning them.
    host = StaticHost("engine-a", clock, registry=registry)
    run = WorkflowRun.objects.create(workflow_id="wf-1", name="n", status="running")
    bump = Update(WorkflowRun, {"pk": run.pk}, {"version": F("version") + 1})
    assert fenced_commit(host, "wf-1", [], [bump]).committed


def test_a_broken_connection_during_an_acquire_tracks_nothing(fault, clock: ManualClock) -> None:
    registry = _registry("engine-a", clock)
    with fault(), pytest.raises(DatabaseError):
        registry.acquire("wf")
    assert registry.tracked() == []
    connection.close_if_unusable_or_obsolete()
    assert not WorkflowClaim.objects.filter(pk="wf", engine_id__isnull=False).exists()
    assert registry.acquire("wf").epoch == 1
    assert _events("wf") == [("acquire", 1, "engine-a")]


# -- deadlocks and serialization failures ----------------------------------------------


class _DriverError(Exception):
    """Stands in for the driver's exception (psycopg's carries ``sqlstate``)."""

    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


def _deadlock(sqlstate: str) -> OperationalError:
    exc = OperationalError("deadlock detected")
    exc.__cause__ = _DriverError(sqlstate)
    return exc


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(batch_module.time, "sleep", slept.append)
    return slept


@pytest.mark.parametrize("sqlstate", ["40P01", "40001", "55P03"])
def test_a_deadlock_inside_the_batch_is_retried_and_commits_once(
    sqlstate: str, clock: ManualClock, no_backoff: list[float]
) -> None:
    """The database aborts the acquire at its event INSERT (one statement on
    PostgreSQL, the last write of the transaction on SQLite): retried, once."""
    event_table = ClaimEvent._meta.db_table
    inserts: list[str] = []

    def flaky(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "INSERT" in sql.upper() and event_table in sql:
            inserts.append(sql)
            if len(inserts) == 1:
                raise _deadlock(sqlstate)
        return execute(sql, params, many, context)

    registry = _registry("engine-a", clock)
    with connection.execute_wrapper(flaky):
        result = registry.acquire("wf")
    assert (result.status, result.epoch) == ("acquired", 1)
    assert len(inserts) == 2
    assert len(no_backoff) == 1
    assert _events("wf") == [("acquire", 1, "engine-a")]  # exactly once
    assert _columns("wf") == (1, "engine-a", clock.now + TTL, clock.now)
    assert registry.tracked() == ["wf"]


def test_a_deadlocked_fenced_write_is_retried_and_applied_once(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch, no_backoff: list[float]
) -> None:
    host = StaticHost("engine-a", clock)
    host.registry.acquire("wf")
    run = WorkflowRun.objects.create(workflow_id="wf", name="n", status="running")
    run_table = WorkflowRun._meta.db_table
    attempts: list[str] = []

    def flaky(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        # The statement that writes the run (the batch's one statement on
        # PostgreSQL, its UPDATE in the general path) is chosen as the victim.
        if f'UPDATE "{run_table}" SET' in sql:
            attempts.append(sql)
            if len(attempts) == 1:
                raise _deadlock("40P01")
        return execute(sql, params, many, context)

    bump = Update(WorkflowRun, {"pk": run.pk}, {"version": F("version") + 1})
    with connection.execute_wrapper(flaky):
        result = fenced_commit(host, "wf", [], [bump])
    assert (result.committed, result.attempts) == (True, 2)
    assert len(attempts) == 2
    assert WorkflowRun.objects.get(pk=run.pk).version == 1  # applied once


def test_retries_are_bounded_and_apply_nothing(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch, no_backoff: list[float]
) -> None:
    event_table = ClaimEvent._meta.db_table

    def always(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "INSERT" in sql.upper() and event_table in sql:
            raise _deadlock("40P01")
        return execute(sql, params, many, context)

    registry = _registry("engine-a", clock)
    with connection.execute_wrapper(always), pytest.raises(OperationalError):
        registry.acquire("wf")
    assert len(no_backoff) == batch_module.MAX_RETRIES - 1
    assert registry.tracked() == []
    assert not WorkflowClaim.objects.filter(pk="wf", epoch__gt=0).exists()
    assert _events("wf") == []


@contextlib.contextmanager
def _lock_held_elsewhere(workflow_id: str, vendor: str, hold_s: float) -> Iterator[None]:
    """Another connection holds the claim row's lock (PostgreSQL) or the write
    lock (SQLite) for ``hold_s`` seconds; this connection waits only briefly."""
    ready, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold() -> None:
        try:
            if vendor == "postgresql":
                with _pg_admin_connection() as other:
                    other.autocommit = False
                    other.execute(
                        f"SELECT 1 FROM {WorkflowClaim._meta.db_table} "
                        "WHERE workflow_id = %s FOR UPDATE",
                        [workflow_id],
                    )
                    ready.set()
                    time.sleep(hold_s)
                    other.rollback()
            else:
                other = sqlite3.connect(Path(connection.settings_dict["NAME"]), timeout=5)
                other.isolation_level = None
                other.execute("BEGIN IMMEDIATE")
                ready.set()
                time.sleep(hold_s)
                other.execute("ROLLBACK")
                other.close()
        except BaseException as exc:  # surfaced in the main thread
            errors.append(exc)
            ready.set()
        finally:
            done.set()

    short_wait, reset = (
        ("SET lock_timeout = '50ms'", "RESET lock_timeout")
        if vendor == "postgresql"
        else ("PRAGMA busy_timeout = 50", "PRAGMA busy_timeout = 30000")
    )
    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    ready.wait(10)
    with connection.cursor() as cursor:
        cursor.execute(short_wait)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(reset)
        done.wait(10)
        thread.join(10)
        assert not errors, errors


def test_a_real_lock_timeout_is_retried_until_the_lock_is_free(
    clock: ManualClock, vendor: str
) -> None:
    WorkflowClaim.objects.create(workflow_id="wf")  # the row the other connection locks
    registry = _registry("engine-a", clock)
    transition = build_acquire(registry.read("wf"), engine_id="engine-a", now=clock.now, ttl_ms=TTL)
    with _lock_held_elsewhere("wf", vendor, hold_s=0.4):
        started = time.monotonic()
        result = conditional_batch(transition.conditions, transition.writes)
        waited = time.monotonic() - started
    assert result.committed
    assert result.attempts >= 2, "the batch should have hit the held lock at least once"
    assert waited >= 0.2
    assert _events("wf") == [("acquire", 1, "engine-a")]
    assert _columns("wf") == (1, "engine-a", clock.now + TTL, clock.now)


# -- the wake guard's read failing ------------------------------------------------------


def _guard_fault(vendor: str, name: str):
    make, needs_pg = FAULTS[name]
    if needs_pg and vendor != "postgresql":
        pytest.skip("a real broken connection needs PostgreSQL")
    return make


@pytest.mark.parametrize("fault_name", sorted(FAULTS))
def test_a_failed_guard_read_proceeds_and_the_fence_is_the_backstop(
    fault_name: str, clock: ManualClock, vendor: str
) -> None:
    make = _guard_fault(vendor, fault_name)
    a = StaticHost("engine-a", clock)
    a.registry.acquire("live")
    a.registry.acquire("rotated")
    runs = {
        wf: WorkflowRun.objects.create(workflow_id=wf, name="n", status="running")
        for wf in ("live", "rotated")
    }
    snapshot = a.registry.read("rotated")
    rotation = build_rotation(snapshot, actor="web", now=clock.now, reason="cancel")
    assert conditional_batch(rotation.conditions, rotation.writes).committed

    with make():
        assert confirm_wake_ownership(a, "rotated", "sleep") == "proceed"
    connection.close_if_unusable_or_obsolete()
    with make():
        assert confirm_wake_ownership(a, "live", "signal") == "proceed"
    connection.close_if_unusable_or_obsolete()
    wakes = dict(a.metrics.snapshot().wakes)
    assert wakes == {("sleep", "proceed", "local"): 1, ("signal", "proceed", "local"): 1}

    # With the database back the guard tells the two apart again ...
    assert confirm_wake_ownership(a, "rotated", "sleep") == "discard"
    assert confirm_wake_ownership(a, "live", "signal") == "proceed"

    # ... and whatever the blip let through, the fenced write decides.
    def bump(wf: str) -> Update:
        return Update(WorkflowRun, {"pk": runs[wf].pk}, {"version": F("version") + 1})

    with pytest.raises(EngineDeposedError) as info:
        fenced_commit(a, "rotated", [], [bump("rotated")])
    assert info.value.workflow_id == "rotated"
    assert fenced_commit(a, "live", [], [bump("live")]).committed
    versions = dict(WorkflowRun.objects.values_list("workflow_id", "version"))
    assert versions == {"live": 1, "rotated": 0}


# -- corrupt WorkflowClaim rows ---------------------------------------------------------

_epochs = st.one_of(
    st.sampled_from(
        [0, -1, 1, 2, MAX_EPOCH_EXCLUSIVE - 2, MAX_EPOCH_EXCLUSIVE - 1, BIGINT_MAX, BIGINT_MIN]
    ),
    st.integers(BIGINT_MIN, BIGINT_MAX),
)
_stamps = st.one_of(
    st.none(),
    st.sampled_from([-1, 0, 1_000, 2**53 - 1, 2**53, FAR, BIGINT_MAX, BIGINT_MIN]),
    st.integers(BIGINT_MIN, BIGINT_MAX),
)
_engine_ids = st.one_of(
    st.none(),
    st.sampled_from(["", "engine-a", "engine-b", " ", "x" * 200]),
    st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=200),
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(epoch=_epochs, engine_id=_engine_ids, expires_at=_stamps, claimed_at=_stamps)
# engine-a's own epoch and id next to out-of-range or missing timestamps:
@example(epoch=1, engine_id="engine-a", expires_at=-5, claimed_at=1_000)
@example(epoch=1, engine_id="engine-a", expires_at=FAR, claimed_at=-1)
@example(epoch=1, engine_id="engine-a", expires_at=2**53, claimed_at=1_000)
@example(epoch=1, engine_id="engine-a", expires_at=BIGINT_MAX, claimed_at=BIGINT_MIN)
@example(epoch=1, engine_id="engine-a", expires_at=None, claimed_at=1_000)
@example(epoch=1, engine_id="engine-a", expires_at=None, claimed_at=None)
@example(epoch=1, engine_id=None, expires_at=None, claimed_at=None)
@example(epoch=BIGINT_MAX, engine_id=None, expires_at=None, claimed_at=None)
@example(epoch=MAX_EPOCH_EXCLUSIVE - 1, engine_id="engine-b", expires_at=5, claimed_at=1)
@example(epoch=-3, engine_id="engine-b", expires_at=FAR, claimed_at=1)
def test_any_stored_claim_row_is_read_fail_closed(
    epoch: int, engine_id: str | None, expires_at: int | None, claimed_at: int | None
) -> None:
    WorkflowClaim.objects.all().delete()
    ClaimEvent.objects.all().delete()
    WorkflowRun.objects.all().delete()
    clock = ManualClock(2_000_000)
    a, b = StaticHost("engine-a", clock), StaticHost("engine-b", clock)
    # engine-a held the claim for real; then the row was overwritten by hand or by a bug.
    assert a.registry.acquire("wf").epoch == 1
    written = _columns("wf")
    run = WorkflowRun.objects.create(workflow_id="wf", name="n", status="running")
    stored = (epoch, engine_id, expires_at, claimed_at)
    WorkflowClaim.objects.filter(pk="wf").update(
        epoch=epoch, engine_id=engine_id, expires_at=expires_at, claimed_at=claimed_at
    )
    holder = decode_holder_row(engine_id, epoch, expires_at, claimed_at)
    absent = engine_id is None and expires_at is None and claimed_at is None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeftWarning)
        snapshot = b.registry.read("wf")
        assert (snapshot.epoch, snapshot.holder, snapshot.holder_absent) == (epoch, holder, absent)

        # The guard: a match only for a decodable holder at exactly that generation.
        check = wake_ownership_check(
            workflow_id="wf", wake_kind="sleep", expected_engine_id="engine-a", expected_epoch=1
        )
        is_me = holder is not None and (holder.engine_id, holder.epoch) == ("engine-a", 1)
        assert check.status == ("match" if is_me else "discarded")
        if not is_me:
            reason = (
                "holder-absent"
                if absent
                else "holder-undecodable"
                if holder is None
                else "generation-mismatch"
            )
            assert check.reason == reason
        assert confirm_wake_ownership(a, "wf", "sleep") == ("proceed" if is_me else "discard")

        # The fence: a corrupt holder is never "me".
        bump = Update(WorkflowRun, {"pk": run.pk}, {"version": F("version") + 1})
        try:
            fenced_commit(a, "wf", [], [bump])
            wrote = True
        except EngineDeposedError:
            wrote = False
        assert wrote == is_me, f"fenced write {'committed' if wrote else 'refused'} on {stored}"
        assert WorkflowRun.objects.get(pk=run.pk).version == int(is_me)

        # Inspection never crashes; a corrupt holder counts as expired.
        state = claim_state(WorkflowClaim.objects.get(pk="wf"), clock.now)
        assert state == ("released" if absent else "expired" if holder is None else state)
        cluster_status(now_ms=clock.now)

        # A renewal (on the exact holder engine-a wrote) never revives a changed row.
        a.registry.acquire("other")
        outcomes = {o.workflow_id: o.status for o in a.registry.renew_all()}
        assert outcomes["other"] == "renewed"
        if stored == written:
            assert outcomes["wf"] == "renewed"
            return
        assert outcomes.get("wf", "lost") == "lost"
        assert _columns("wf") == stored

        # Another engine's acquire and takeover: never an exception but the explicit refusal
        # of an epoch that cannot be incremented safely.
        exhausted = max(epoch, 0) + 1 >= MAX_EPOCH_EXCLUSIVE
        if absent:
            if exhausted:
                with pytest.raises(EpochExhaustedError):
                    b.registry.acquire("wf")
            else:
                assert b.registry.acquire("wf").epoch == max(epoch, 0) + 1
            return
        result = b.registry.acquire("wf")
        assert (result.status, result.held_by) == (
            "lost-race",
            holder.engine_id if holder is not None else None,
        )
        if holder is not None and holder.expires_at + GRACE + 1 + TTL < 2**53:
            clock.now = max(clock.now, holder.expires_at + GRACE + 1)
        if holder is not None and holder.expires_at + GRACE >= clock.now:
            # Valid, and live for as long as a safe clock can count.
            assert b.registry.takeover("wf").status == "not-expired"
        elif exhausted:
            with pytest.raises(EpochExhaustedError):
                b.registry.takeover("wf")
            assert _columns("wf") == stored
        else:
            taken = b.registry.takeover("wf")
            assert (taken.status, taken.epoch) == ("acquired", max(epoch, 0) + 1)


# -- corrupt OwnershipModeMarker --------------------------------------------------------

CORRUPT_MARKERS = {
    "unknown-mode": ("workflow_lease", 1_000),
    "none-is-not-a-stored-mode": ("none", 1_000),
    "empty-mode": ("", 1_000),
    "mode-case": ("WORKFLOW-LEASE", 1_000),
    "mode-padded": ("lease ", 1_000),
    "negative-established-at": ("workflow-lease", -1),
    "established-beyond-safe-integer": ("lease", 2**53),
    "established-bigint-max": ("workflow-lease", BIGINT_MAX),
    "established-bigint-min": ("lease", BIGINT_MIN),
}


@pytest.mark.parametrize("name", sorted(CORRUPT_MARKERS))
def test_a_corrupt_marker_is_an_error_and_never_restamped(name: str, clock: ManualClock) -> None:
    mode, established_at = CORRUPT_MARKERS[name]
    OwnershipModeMarker.objects.create(mode=mode, established_at=established_at)
    for configured in ("workflow-lease", "lease", "none"):
        host = StaticHost(f"engine-{configured}", clock, ownership=configured)  # type: ignore[arg-type]
        with pytest.raises(ImproperlyConfigured) as info:
            check_mode_marker(host)
        assert not isinstance(info.value, OwnershipModeMismatchError)
        assert "does not decode" in str(info.value)
        row = OwnershipModeMarker.objects.get()
        assert (row.mode, row.established_at) == (mode, established_at)
    # Inspection shows it as stored and does not crash.
    assert cluster_status(now_ms=clock.now).marker == {
        "mode": mode,
        "established_at": established_at,
    }


def test_the_operator_can_still_reset_a_corrupt_marker(clock: ManualClock) -> None:
    OwnershipModeMarker.objects.create(mode="garbage", established_at=-7)
    call_command("weft_reset_mode", interactive=False, stdout=io.StringIO())
    assert not OwnershipModeMarker.objects.exists()
    host = StaticHost("engine-a", clock)
    marker = check_mode_marker(host)
    assert marker is not None and marker.mode == "workflow-lease"


# -- corrupt GlobalLease -------------------------------------------------------------------

LIVE = 10**12  # an expiry far in the future


def _lease_manager(holder_id: str, clock: ManualClock) -> GlobalLeaseManager:
    return GlobalLeaseManager(
        holder_id=holder_id,
        clock=clock,
        ttl_ms=TTL,
        renew_interval_ms=RENEW,
        wait_timeout_ms=0,
        sleep=lambda s: None,
    )


# (epoch, holder_id, expires_at) -> stealable at once?
CORRUPT_LEASES = {
    "negative-epoch": ((-5, "engine-x", LIVE), True),
    "zero-epoch-with-holder": ((0, "engine-x", LIVE), True),
    "bigint-min-epoch": ((BIGINT_MIN, "engine-x", LIVE), True),
    "empty-holder": ((3, "", LIVE), True),
    "holder-without-expiry": ((3, "engine-x", None), True),
    "negative-expiry": ((3, "engine-x", -1), True),
    "expiry-beyond-safe-integer": ((3, "engine-x", 2**53), True),
    "expiry-bigint-max": ((3, "engine-x", BIGINT_MAX), True),
    "expiry-without-holder": ((3, None, LIVE), True),
}
EXHAUSTED_LEASES = {
    "epoch-at-the-limit": (MAX_EPOCH_EXCLUSIVE - 1, "engine-x", 1),
    "epoch-bigint-max": (BIGINT_MAX, "engine-x", 1),
    "epoch-bigint-max-released": (BIGINT_MAX, None, None),
}


@pytest.mark.parametrize("name", sorted(CORRUPT_LEASES))
def test_a_garbage_lease_holder_is_never_live(name: str, clock: ManualClock) -> None:
    (epoch, holder_id, expires_at), _ = CORRUPT_LEASES[name]
    GlobalLease.objects.create(epoch=epoch, holder_id=holder_id, expires_at=expires_at)
    manager = _lease_manager("engine-a", clock)
    snapshot = manager.read()
    assert (snapshot.epoch, snapshot.holder_id, snapshot.expires_at) == (
        epoch,
        holder_id,
        expires_at,
    )
    assert manager.is_expired(snapshot, clock.now)
    assert manager.acquire() == max(epoch, 0) + 1
    row = GlobalLease.objects.get()
    assert (row.epoch, row.holder_id, row.expires_at) == (
        max(epoch, 0) + 1,
        "engine-a",
        clock.now + TTL,
    )
    assert manager.renew_once()


@pytest.mark.parametrize("name", sorted(EXHAUSTED_LEASES))
def test_an_unmintable_lease_epoch_is_refused_explicitly(name: str, clock: ManualClock) -> None:
    epoch, holder_id, expires_at = EXHAUSTED_LEASES[name]
    GlobalLease.objects.create(epoch=epoch, holder_id=holder_id, expires_at=expires_at)
    manager = _lease_manager("engine-a", clock)
    with pytest.raises(EpochExhaustedError):
        manager.try_acquire()
    row = GlobalLease.objects.get()
    assert (row.epoch, row.holder_id, row.expires_at) == (epoch, holder_id, expires_at)
    assert manager.epoch is None
