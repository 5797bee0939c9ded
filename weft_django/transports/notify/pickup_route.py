"""Pickup routing: one engine answers a pickup wake at once, the others later.

Why: every start NOTIFYs every LISTENing engine, and each engine with room
ran a pickup transaction for it -- N engines, N pickup transactions per
start, one of which got the run (the others found it locked or taken). On a
small machine those losing passes took the CPU the turns needed, and four
engines did less than two.

How: each engine's wake connection LISTENs with a statement that carries
``ROUTE_MARK`` as a comment, so ``pg_stat_activity.query`` shows it (the
connection's ``application_name`` stays the user's); its listener reads the
backend pids of all such sessions of its database every ``PEERS_REFRESH_S``
(a killed engine's session ends, so it drops out). A pickup wake names its
workflow; the rendezvous hash of (workflow id, pid) over those pids picks
ONE engine, which picks up at once. Every other engine only arms a delayed
fallback pickup (``FALLBACK_PICKUP_S``); wakes arriving while one is armed
fold into it, so a burst costs each of them one pickup pass per delay, and
that pass takes a batch.

The fallback is gated: while armed it collects the workflow ids of the
wakes it stands behind (at most ``GATE_IDS``), and when it falls due it asks
``gate`` -- one autocommit ``SELECT`` on the listener's own connection --
whether any of them is still pending. Usually the chosen engine took them
all within the delay, and the engine then spends no pickup transaction and
does not wake its poll thread at all: a start costs an idle engine one
NOTIFY read and, per delay, one indexed read.

The invariant: a run is never left pending because of the routing. Routing
only delays pickups, it never drops one: the fallback fires on every
engine that was not chosen (the chosen one may be full, stopping, or gone
since the last refresh) unless the gate saw every run it stands behind no
longer pending (then nothing is left for it to pick up: a pickup only takes
pending runs); a gate that fails, or too many ids to ask about, picks up
as before. And whenever the peer set is unknown or stale in a
way we can see (no refresh yet, this engine not in it, a wake without a
workflow id) the wake picks up at once, as before routing. The pickup
itself is unchanged: the fenced batch with ``SKIP LOCKED`` (``engine.pickup``).
Polling stays the backstop.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("weft_django.transports")

#: The comment that marks an engine's routed wake connection's statements.
ROUTE_MARK = "weft-pickup-route"
#: How long an engine not chosen for a pickup wake waits before its own pickup (s).
FALLBACK_PICKUP_S = 0.1
#: How often the listener re-reads the live engines' wake sessions (s).
PEERS_REFRESH_S = 1.0
#: The most workflow ids a fallback asks the gate about; more: it picks up unasked.
GATE_IDS = 500

# Carries the mark itself: a peer is seen while it runs this, too. A role
# that may not read other roles' ``query`` sees only itself: no routing.
PEERS_SQL = (
    f"SELECT /* {ROUTE_MARK} */ pg_backend_pid(), COALESCE(array_agg(pid), '{{}}') "
    "FROM pg_stat_activity WHERE datname = current_database() AND query LIKE %s"
)
PEERS_PATTERN = f"%/* {ROUTE_MARK} */%"


def chosen(workflow_id: str, peers: tuple[int, ...]) -> int:
    """The peer (backend pid) a pickup wake of ``workflow_id`` goes to: the
    highest rendezvous score, so a peer leaving moves only its own share."""
    key = workflow_id.encode()
    return max(peers, key=lambda pid: (zlib.crc32(key, pid & 0xFFFFFFFF), pid))


class PickupRoute:
    """One listener's routing state: the peers as last read and the armed fallback."""

    def __init__(
        self,
        on_pickup: Callable[[], None],
        *,
        delay_s: float = FALLBACK_PICKUP_S,
        refresh_s: float = PEERS_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
        gate: Callable[[list[str]], bool] | None = None,
    ) -> None:
        self.on_pickup = on_pickup
        #: ``gate(workflow_ids)``: is any of them still pending? (``None``: no gate.)
        self.gate = gate
        self.delay_s = delay_s
        self.refresh_s = refresh_s
        self.clock = clock
        #: This listener's backend pid and the live listeners' pids (with it);
        #: ``None``: unknown -- every pickup wake picks up at once.
        self.me: int | None = None
        self.peers: tuple[int, ...] = ()
        self._refresh_due = 0.0
        self._fallback_due: float | None = None
        #: The workflow ids the armed fallback stands behind; ``None``: too many to ask.
        self._behind: set[str] | None = set()
        self._lock = threading.Lock()

    # -- peers -------------------------------------------------------------------
    def refresh_due(self) -> bool:
        return self.clock() >= self._refresh_due

    def refresh(self, conn: Any, relisten: Any = None) -> None:
        """Re-read the peers on the listener's own (autocommit) connection;
        then run ``relisten`` (the marked LISTEN again, a no-op for the
        server: the session's last statement shows as its LISTEN again)."""
        self._refresh_due = self.clock() + self.refresh_s
        try:
            row = conn.execute(PEERS_SQL, [PEERS_PATTERN]).fetchone()
            if relisten is not None:
                conn.execute(relisten)
        except Exception:  # unknown peers: every wake picks up at once, as without routing
            logger.debug("reading the wake listeners failed", exc_info=True)
            with self._lock:
                self.me, self.peers = None, ()
            return
        me, peers = int(row[0]), tuple(sorted(int(p) for p in row[1]))
        with self._lock:
            self.me, self.peers = (me, peers) if me in peers else (None, ())

    def forget(self) -> None:
        """The connection is gone: peers unknown until the next refresh."""
        with self._lock:
            self.me, self.peers = None, ()
        self._refresh_due = 0.0

    # -- wakes -------------------------------------------------------------------
    def routed_here(self, workflow_id: str) -> bool:
        with self._lock:
            me, peers = self.me, self.peers
        if me is None or len(peers) < 2 or not workflow_id:
            return True
        return chosen(workflow_id, peers) == me

    def wake(self, workflow_id: str) -> None:
        """A pickup wake of ``workflow_id``: pick up now, or arm the fallback."""
        if self.routed_here(workflow_id):
            self.on_pickup()
            return
        with self._lock:
            if self._fallback_due is None:
                self._fallback_due = self.clock() + self.delay_s
            if self._behind is not None:
                self._behind.add(workflow_id)
                if len(self._behind) > GATE_IDS:
                    self._behind = None

    def timeout(self, most: float) -> float:
        """How long the listener may block before ``fire_due`` or a refresh."""
        now = self.clock()
        wait = min(most, max(0.0, self._refresh_due - now))
        with self._lock:
            due = self._fallback_due
        if due is not None:
            wait = min(wait, max(0.0, due - now))
        return wait

    def fire_due(self) -> bool:
        """Run the armed fallback pickup once it is due, unless the gate saw
        none of its runs still pending; ``True`` when it fired."""
        with self._lock:
            due = self._fallback_due
            if due is None or self.clock() < due:
                return False
            self._fallback_due = None
            behind, self._behind = self._behind, set()
        if behind and self.gate is not None and not self._still_pending(sorted(behind)):
            return False
        self.on_pickup()
        return True

    def _still_pending(self, workflow_ids: list[str]) -> bool:
        assert self.gate is not None
        try:
            return self.gate(workflow_ids)
        except Exception:  # unknown: pick up, as without the gate
            logger.debug("the fallback gate failed; picking up", exc_info=True)
            return True

    @property
    def armed(self) -> bool:
        with self._lock:
            return self._fallback_due is not None


__all__ = [
    "FALLBACK_PICKUP_S",
    "GATE_IDS",
    "PEERS_REFRESH_S",
    "ROUTE_MARK",
    "PickupRoute",
    "chosen",
]
