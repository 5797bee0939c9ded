"""Session presence (``ownership.presence``): the dead-engine query, the
takeover of a gone holder, reconnection and forks (PostgreSQL); off on SQLite.

Invariants protected:
- an engine is gone exactly when its record carries a presence key and no
  session holds that advisory lock; it is marked stopped once (by whoever
  sees it first) and stays in every watcher's set for the window;
- records without a key (SQLite, setting off, older engines) and the
  watcher itself are never gone;
- a gone holder is takeable before it expires, through the same exact-holder
  CAS: a holder that changed meanwhile (renewed by a live engine) wins;
- a broken presence connection is re-opened with its lock on the next look,
  and the record is live again;
- a forked child neither uses nor ends its parent's presence session.
"""

from __future__ import annotations

import os

import pytest
from django.db import connection

from tests.support import wait_for
from weft_django.engine import Engine
from weft_django.models import EngineRecord, WorkflowClaim
from weft_django.ownership import presence
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.registry import ClaimRegistry
from weft_django.ownership.transitions import build_takeover

pytestmark = pytest.mark.usefixtures("batch_db")

TTL = 30_000
RENEW = 5_000
WINDOW = TTL + 2 * RENEW

postgres_only = pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"), reason="PostgreSQL only"
)


def _record(engine_id: str, key: int | None, now: int = 1_000) -> None:
    EngineRecord.objects.create(
        engine_id=engine_id, mode="workflow-lease", started_at=now, heartbeat_at=now,
        presence_key=key,
    )  # fmt: skip


def _opened(engine_id: str) -> presence.SessionPresence:
    p = presence.SessionPresence("default", engine_id)
    _record(engine_id, p.open())
    return p


def _looked(p: presence.SessionPresence, now: int) -> list[tuple[str, bool]]:
    """``p``'s look once it sees a change: a closed session's backend exits (and
    its lock goes) a moment after the client closed it."""
    return wait_for("a gone engine", lambda: p.gone_engines(now_ms=now, window_ms=WINDOW))


@postgres_only
def test_a_closed_session_is_gone_marked_once_and_seen_by_every_watcher() -> None:
    a, b, c = _opened("pa"), _opened("pb"), _opened("pc")
    _record("no-key", None)
    try:
        assert b.gone_engines(now_ms=2_000, window_ms=WINDOW) == []
        a.close()
        assert _looked(b, 2_000) == [("pa", True)]
        assert EngineRecord.objects.get(pk="pa").stopped_at == 2_000
        # Marked already: another watcher sees it gone, not newly marked.
        assert c.gone_engines(now_ms=2_500, window_ms=WINDOW) == [("pa", False)]
        assert EngineRecord.objects.get(pk="pa").stopped_at == 2_000
        # Past the window the TTL path covers it; it leaves the set.
        assert c.gone_engines(now_ms=2_001 + WINDOW, window_ms=WINDOW) == []
        # A record without a key, and the watcher's own, are never gone.
        assert EngineRecord.objects.get(pk="no-key").stopped_at is None
    finally:
        b.close()
        c.close()


@postgres_only
def test_an_engine_boots_with_its_lock_taken_and_disposes_without_being_gone(clock) -> None:
    engine = Engine("boot-a", clock=clock, background_tasks="manual").boot()
    watcher = _opened("watcher")
    try:
        record = EngineRecord.objects.get(pk="boot-a")
        assert engine.presence is not None and record.presence_key == engine.presence.key
        assert watcher.gone_engines(now_ms=clock(), window_ms=WINDOW) == []
        engine.dispose(grace=0)
        # Disposed: stopped by itself; its lock is gone with its session.
        stopped = EngineRecord.objects.get(pk="boot-a").stopped_at
        assert stopped is not None
        assert _looked(watcher, clock()) == [("boot-a", False)]
        assert EngineRecord.objects.get(pk="boot-a").stopped_at == stopped
    finally:
        watcher.close()


@postgres_only
def test_a_gone_holder_is_taken_over_before_expiry_with_the_exact_holder_cas(clock) -> None:
    dead = Engine("dead", clock=clock, background_tasks="manual").boot()
    taker = Engine("taker", clock=clock, background_tasks="manual").boot()
    assert dead.registry is not None and taker.registry is not None
    for wid in ("g1", "g2"):
        assert dead.registry.acquire(wid).status == "acquired"
    assert dead.presence is not None
    dead.presence.close()  # the session ends as at a SIGKILL: no release, no stop
    clock.advance(1)
    wait_for("the dead engine gone", lambda: taker.gone_holders(refresh=True))
    assert taker.gone_holders() == frozenset({"dead"})
    assert EngineRecord.objects.get(pk="dead").stopped_at is not None
    # Not expired: without the gone set the takeover is refused.
    assert taker.registry.takeover("g1").status == "not-expired"
    result = taker.registry.takeover("g1", frozenset({"dead"}))
    assert result.status == "acquired" and result.epoch == 2
    claim = WorkflowClaim.objects.get(pk="g1")
    assert (claim.engine_id, claim.epoch) == ("taker", 2)
    # The "dead" engine renews (it was alive after all): its holder changed, so
    # the takeover read before loses its CAS, and only the renewed holder stays.
    other = ClaimRegistry(
        engine_id="third", clock=clock, claim_ttl_ms=TTL, claim_renew_interval_ms=RENEW
    )
    stale = other.read("g2")
    dead.registry.renew_all()
    transition = build_takeover(stale, engine_id="third", now=clock(), ttl_ms=TTL)
    assert not conditional_batch(transition.conditions, transition.writes).committed
    assert WorkflowClaim.objects.get(pk="g2").engine_id == "dead"
    # The renewal lost g1 (taken over): the fence holds for the zombie.
    assert dead.registry.current_epoch("g1") is None
    taker.dispose(grace=0)


@postgres_only
def test_the_reclaim_pass_takes_a_gone_engines_claims_at_once(clock) -> None:
    from weft_django import client
    from weft_django.models import WorkflowRun

    dead = Engine("dead-r", clock=clock, background_tasks="manual").boot()
    handle = client.start("signal-wait", {"id": "pr"}, workflow_id="presence-reclaim")
    dead.run_until_idle()
    assert WorkflowRun.objects.get(pk=handle.run_id).status == "parked"
    taker = Engine("taker-r", clock=clock, background_tasks="manual").boot()
    taker.run_until_idle()
    assert WorkflowClaim.objects.get(pk="presence-reclaim").engine_id == "dead-r"
    assert dead.presence is not None
    dead.presence.close()
    clock.advance(1)  # far below CLAIM_TTL
    wait_for("the dead engine gone", lambda: taker.gone_holders(refresh=True))
    taker.run_until_idle()
    claim = WorkflowClaim.objects.get(pk="presence-reclaim")
    assert (claim.engine_id, claim.epoch) == ("taker-r", 2)
    taker.dispose(grace=0)


@postgres_only
def test_a_terminated_presence_session_is_reopened_and_the_record_is_live_again() -> None:
    a, b = _opened("ra"), _opened("rb")
    try:
        pid = a.backend_pid()
        with connection.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", [pid])
        assert _looked(b, 5_000) == [("ra", True)]
        # a's next look finds its connection broken: a new session, the lock again.
        assert a.gone_engines(now_ms=5_100, window_ms=WINDOW) == []
        assert a.backend_pid() != pid
        record = EngineRecord.objects.get(pk="ra")
        assert record.stopped_at is None and record.presence_key == a.key
        assert b.gone_engines(now_ms=5_200, window_ms=WINDOW) == []
    finally:
        a.close()
        b.close()


@postgres_only
# The fork is the point (a Celery prefork child); Python 3.12+ warns on any fork
# of a process with threads (under pytest-xdist, the worker's channel thread).
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_does_not_end_its_parents_presence_session() -> None:
    a, b = _opened("fa"), _opened("fb")
    pid_a = a.backend_pid()
    try:
        pid = os.fork()
        if pid == 0:  # the child: drops every presence and exits, closing what it holds
            try:
                presence.close_all()
                import gc

                gc.collect()
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert status == 0
        assert b.gone_engines(now_ms=3_000, window_ms=WINDOW) == []
        assert a.gone_engines(now_ms=3_000, window_ms=WINDOW) == []
        assert a.backend_pid() == pid_a
    finally:
        a.close()
        b.close()


def test_no_session_presence_off_postgresql_or_when_turned_off(clock) -> None:
    engine = Engine("np", clock=clock, background_tasks="manual", session_presence=False).boot()
    assert engine.presence is None and engine.gone_holders(refresh=True) == frozenset()
    assert EngineRecord.objects.get(pk="np").presence_key is None
    engine.dispose(grace=0)
    if connection.vendor != "postgresql":
        on = Engine("np-on", clock=clock, background_tasks="manual").boot()
        assert on.settings.session_presence and not on.uses_session_presence()
        assert EngineRecord.objects.get(pk="np-on").presence_key is None
        on.dispose(grace=0)


@postgres_only
def test_after_its_own_session_ended_an_engine_names_nobody_gone_for_the_grace() -> None:
    """A database restart ends every session at once: the first engine back
    must not mark the others stopped (and take all their claims over) before
    they had the grace to retake their locks; one still gone after it is."""
    a, b = _opened("qa"), _opened("qb")
    a.quiet_after_reconnect_ms = 2_000
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", [a.backend_pid()])
            cur.execute("SELECT pg_terminate_backend(%s)", [b.backend_pid()])
        wait_for("both sessions ended", lambda: a.backend_pid() is not None and _ended(a, b))
        # a reconnects first; b has not retaken its lock yet.
        assert a.gone_engines(now_ms=10_000, window_ms=WINDOW) == []
        assert a.gone_engines(now_ms=11_999, window_ms=WINDOW) == []
        assert EngineRecord.objects.get(pk="qb").stopped_at is None
        # Past the grace, an engine still without its lock is gone.
        assert a.gone_engines(now_ms=12_000, window_ms=WINDOW) == [("qb", True)]
    finally:
        a.close()
        b.close()


def _ended(*sessions: presence.SessionPresence) -> bool:
    """Whether no backend holds any of ``sessions``' presence locks any more."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
            "AND objid = ANY(%s)",
            [presence.NAMESPACE, [s.key for s in sessions]],
        )
        return int(cur.fetchone()[0]) == 0
