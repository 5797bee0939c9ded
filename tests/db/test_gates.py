"""Start-up gates (SPEC §4.3): capability, then the store's ownership-mode marker.

Invariants protected: the first fencing engine stamps the marker once (a
compare-and-swap on its absence, so two engines booting together agree on
one marker); every later engine with another mode is refused with
``OwnershipModeMismatchError(configured_mode, stored_mode, established_at)``;
a marker that does not decode is an error and is never re-stamped; a
``none`` engine never writes the marker but refuses a fencing store; and a
fencing mode refuses a database that cannot run the conditional batch.
"""

from __future__ import annotations

import threading

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from tests.support import ManualClock, StaticHost
from weft_django.conf import build_settings
from weft_django.errors import OwnershipModeMismatchError
from weft_django.kernel.clock import wall_ms
from weft_django.models import OwnershipModeMarker
from weft_django.ownership import gates as gates_module
from weft_django.ownership.gates import (
    check_clock_skew,
    check_mode_marker,
    reset_mode_marker,
    run_gates,
)

pytestmark = pytest.mark.usefixtures("batch_db")


def _marker() -> tuple[str, int]:
    row = OwnershipModeMarker.objects.get()
    return (row.mode, row.established_at)


@pytest.mark.parametrize("mode", ["workflow-lease", "lease"])
def test_first_boot_establishes_the_marker(clock: ManualClock, mode: str) -> None:
    marker = run_gates(StaticHost("engine-a", clock, ownership=mode))
    assert marker is not None
    assert (marker.mode, marker.established_at) == (mode, clock.now)
    assert _marker() == (mode, clock.now)


def test_same_mode_boots_again_without_restamping(clock: ManualClock) -> None:
    run_gates(StaticHost("engine-a", clock))
    established = clock.now
    clock.advance(60_000)
    marker = run_gates(StaticHost("engine-b", clock))
    assert marker.established_at == established
    assert _marker() == ("workflow-lease", established)


def test_a_second_engine_with_another_mode_is_refused(clock: ManualClock) -> None:
    run_gates(StaticHost("engine-a", clock))
    established = clock.now
    clock.advance(1_000)
    with pytest.raises(OwnershipModeMismatchError) as info:
        run_gates(StaticHost("engine-b", clock, ownership="lease"))
    error = info.value
    assert (error.configured_mode, error.stored_mode, error.established_at) == (
        "lease",
        "workflow-lease",
        established,
    )
    assert _marker() == ("workflow-lease", established)


def test_none_never_writes_the_marker(clock: ManualClock) -> None:
    assert run_gates(StaticHost("engine-a", clock, ownership="none")) is None
    assert not OwnershipModeMarker.objects.exists()


@pytest.mark.parametrize("stored", ["workflow-lease", "lease"])
def test_none_refuses_a_fencing_store(clock: ManualClock, stored: str) -> None:
    OwnershipModeMarker.objects.create(mode=stored, established_at=42)
    with pytest.raises(OwnershipModeMismatchError) as info:
        run_gates(StaticHost("engine-a", clock, ownership="none"))
    assert (info.value.configured_mode, info.value.stored_mode, info.value.established_at) == (
        "none",
        stored,
        42,
    )


@pytest.mark.parametrize(
    ("mode", "established_at"),
    [("bogus", 1), ("none", 1), ("", 1), ("workflow-lease", -5)],
)
@pytest.mark.parametrize("configured", ["workflow-lease", "lease", "none"])
def test_an_undecodable_marker_is_an_error_and_never_restamped(
    clock: ManualClock, mode: str, established_at: int, configured: str
) -> None:
    OwnershipModeMarker.objects.create(mode=mode, established_at=established_at)
    with pytest.raises(ImproperlyConfigured, match="does not decode") as info:
        run_gates(StaticHost("engine-a", clock, ownership=configured))
    assert repr(mode) in str(info.value)
    assert "weft_reset_mode" in str(info.value)
    assert _marker() == (mode, established_at)


def test_the_marker_race_between_two_booting_engines_has_one_winner(clock: ManualClock) -> None:
    """Both engines read "absent" before either writes; exactly one CAS wins."""
    barrier = threading.Barrier(2, timeout=10)
    real_read = gates_module._read_marker
    first_read_done: set[int] = set()

    def read_then_wait(db: str):
        row = real_read(db)
        ident = threading.get_ident()
        if ident not in first_read_done:
            first_read_done.add(ident)
            barrier.wait()
        return row

    outcomes: dict[str, object] = {}

    def boot(engine_id: str, mode: str, start: int) -> None:
        try:
            outcomes[engine_id] = check_mode_marker(
                StaticHost(engine_id, ManualClock(start), ownership=mode)
            )
        except Exception as exc:
            outcomes[engine_id] = exc
        finally:
            connections.close_all()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gates_module, "_read_marker", read_then_wait)
        threads = [
            threading.Thread(target=boot, args=("engine-a", "workflow-lease", 1_000)),
            threading.Thread(target=boot, args=("engine-b", "lease", 2_000)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    assert OwnershipModeMarker.objects.count() == 1
    stored_mode, established_at = _marker()
    winner = "engine-a" if stored_mode == "workflow-lease" else "engine-b"
    loser = "engine-b" if winner == "engine-a" else "engine-a"
    assert outcomes[winner].mode == stored_mode
    assert outcomes[winner].established_at == established_at
    error = outcomes[loser]
    assert isinstance(error, OwnershipModeMismatchError), error
    assert (error.stored_mode, error.established_at) == (stored_mode, established_at)


def test_the_marker_race_with_the_same_mode_has_both_succeed(clock: ManualClock) -> None:
    barrier = threading.Barrier(2, timeout=10)
    real_read = gates_module._read_marker
    first_read_done: set[int] = set()

    def read_then_wait(db: str):
        row = real_read(db)
        if threading.get_ident() not in first_read_done:
            first_read_done.add(threading.get_ident())
            barrier.wait()
        return row

    outcomes: dict[str, object] = {}

    def boot(engine_id: str, start: int) -> None:
        try:
            outcomes[engine_id] = check_mode_marker(StaticHost(engine_id, ManualClock(start)))
        except Exception as exc:
            outcomes[engine_id] = exc
        finally:
            connections.close_all()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gates_module, "_read_marker", read_then_wait)
        threads = [
            threading.Thread(target=boot, args=("engine-a", 1_000)),
            threading.Thread(target=boot, args=("engine-b", 2_000)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    mode, established_at = _marker()
    assert mode == "workflow-lease"
    assert established_at in (1_000, 2_000)
    assert outcomes["engine-a"] == outcomes["engine-b"]
    assert outcomes["engine-a"].established_at == established_at


def test_a_marker_deleted_during_the_cas_is_reported(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gates_module, "_read_marker", lambda db: None)
    with pytest.raises(ImproperlyConfigured, match="deleted concurrently"):
        check_mode_marker(StaticHost("engine-a", clock))


# -- capability ------------------------------------------------------------------------

_SQLITE_DEFERRED = {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": ":memory:",
    "OPTIONS": {},
}


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
@pytest.mark.parametrize("mode", ["workflow-lease", "lease"])
def test_a_fencing_mode_refuses_an_incapable_database_before_any_query(
    clock: ManualClock, mode: str
) -> None:
    from django.conf import settings as django_settings

    databases = {**django_settings.DATABASES, "weak": _SQLITE_DEFERRED}
    host = StaticHost(
        "engine-a", clock, ownership=mode, settings=build_settings({"DATABASE": "weak"})[0]
    )
    with (
        override_settings(DATABASES=databases),
        CaptureQueriesContext(connection) as queries,
        pytest.raises(ImproperlyConfigured) as info,
    ):
        run_gates(host)
    assert repr(mode) in str(info.value)
    assert "transaction_mode" in str(info.value)
    assert len(queries) == 0
    assert not OwnershipModeMarker.objects.exists()


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_none_mode_skips_the_capability_gate(clock: ManualClock) -> None:
    from django.conf import settings as django_settings

    databases = {**django_settings.DATABASES, "weak": _SQLITE_DEFERRED}
    host = StaticHost("engine-a", clock, ownership="none")
    with override_settings(DATABASES=databases):
        assert run_gates(host) is None


def test_an_injected_clock_skips_the_clock_check(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    with CaptureQueriesContext(connection) as queries:
        assert check_clock_skew(host) is None
    assert len(queries) == 0


def test_the_clock_check_refuses_a_skewed_engine_clock(clock: ManualClock, vendor: str) -> None:
    host = StaticHost("engine-a", ManualClock(0), uses_injected_clock=False)
    if vendor != "postgresql":
        assert check_clock_skew(host) is None  # SQLite has no server clock
        return
    with pytest.raises(ImproperlyConfigured, match="CLAIM_RENEW_INTERVAL"):
        check_clock_skew(host)
    real = StaticHost("engine-a", wall_ms, uses_injected_clock=False)
    skew = check_clock_skew(real)
    assert skew is not None
    assert abs(skew) <= real.settings.claim_renew_interval_ms


# -- reset_mode_marker -------------------------------------------------------------------


def test_reset_deletes_exactly_the_marker_that_was_read(clock: ManualClock) -> None:
    marker = check_mode_marker(StaticHost("engine-a", clock))
    assert marker is not None
    assert not reset_mode_marker("default", "lease", marker.established_at)  # another mode
    assert not reset_mode_marker("default", marker.mode, marker.established_at + 1)
    assert OwnershipModeMarker.objects.exists()
    assert reset_mode_marker("default", marker.mode, marker.established_at)
    assert not OwnershipModeMarker.objects.exists()
    assert not reset_mode_marker("default", marker.mode, marker.established_at)  # gone


def test_reset_rechecks_inside_the_batch_and_a_refusal_deletes_nothing(clock: ManualClock) -> None:
    marker = check_mode_marker(StaticHost("engine-a", clock))
    assert marker is not None
    seen: list[bool] = []

    def refuse(db: str) -> None:
        seen.append(connections[db].in_atomic_block)
        raise RuntimeError("an engine booted meanwhile")

    with pytest.raises(RuntimeError, match="booted meanwhile"):
        reset_mode_marker("default", marker.mode, marker.established_at, recheck=refuse)
    assert seen == [True]
    assert OwnershipModeMarker.objects.exists()
