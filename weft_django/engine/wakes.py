"""Wakes: the runtime's one seam for "a committed write made a run runnable".

Why this module exists: every write that makes a run runnable (a start, a
resume or retry, a signal, an async-activity completion, a child's end) and
every finished run must reach whoever waits for it -- an engine LISTENing on
PostgreSQL, the owner's Celery queue, a caller blocked in
``WorkflowHandle.result()``. The runtime makes exactly **one** call for
that, ``announce(Wake(...))``, inside the writing transaction; each
installed ``WakeBackend`` gets ``deliver(wake)`` once that transaction
commits (``transaction.on_commit``), so a rolled-back write wakes nobody and
a committed one is visible to whoever the wake reaches.

Backends are chosen the way Django chooses cache and email backends: the
``WEFT["WAKE_BACKENDS"]`` setting lists dotted paths, instantiated once
(``apps.ready()`` installs them), and code that owns a transport installs its
backend at run time (``weft_django.celery.install(app)`` installs the Celery
one). Polling is not a backend: it is the engine's own backstop, always on.
A backend that fails is logged and swallowed -- the durable rows stay the
truth and polling finds what a lost wake missed.

The runtime imports no transport: transports import this module and
implement ``WakeBackend``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from django.core.checks import CheckMessage
from django.db import transaction

from weft_django.kernel.vocab import PICKUP_EVENTS, WakeEvent

logger = logging.getLogger("weft_django.wakes")

WakeSubject = WakeEvent | Literal["finished", "released"]
"""What a wake announces: one of the wake events; ``"finished"`` (a run
reached a terminal or suspended status: callers waiting for a result care);
or ``"released"`` (a force release left the workflow's live run ``run_id``
without a holder: any engine may take it over). A backend ignores the
subjects it has no use for."""


@dataclass(frozen=True)
class Wake:
    """One committed write that should wake ``run_id`` (or its waiters)."""

    event: WakeSubject
    run_id: str
    using: str
    workflow_id: str | None = None
    #: A delayed start's time (engine-clock ms), for ``start``.
    start_at: int | None = None
    #: Backends (``WakeBackend.name``) the write's own statement already
    #: delivered through (``WakeBackend.in_statement``): ``deliver`` skips them.
    delivered_by: frozenset[str] = frozenset()
    #: The run's queue, when the announcer has it at hand (``""``: none); ``None``:
    #: not given. A backend that routes pickups by queue reads it instead of the row.
    queue: str | None = None

    @property
    def is_pickup(self) -> bool:
        """The run is ``pending``: any engine may pick it up."""
        return self.event in PICKUP_EVENTS


class Listening:
    """A running ``listen()``: ``stop()`` ends it (idempotent)."""

    @property
    def connected(self) -> bool:
        """Wakes reach the engine now (its connection LISTENs): only then may
        its polling back off (``engine.poll_cadence``). ``False`` unless the
        backend knows."""
        return False

    def stop(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class DoneWaiter:
    """A caller's open subscription to one run's "finished" announcements.

    Why opened before the caller reads the run: a finish announced between
    "read the row: not done yet" and "start listening" would otherwise be
    missed, and the caller would sleep until its next poll. The caller opens
    the waiter, reads the row again, and only then blocks in ``wait``.
    """

    def wait(self, timeout: float) -> bool:  # pragma: no cover - interface
        """Block up to ``timeout`` s; ``True`` when the run was announced finished."""
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class AsyncDoneWaiter(Protocol):
    """``DoneWaiter`` for an async caller: it lives on the loop that awaits it
    and never blocks a thread (``WorkflowHandle.aresult``)."""

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s without blocking the loop; ``True`` when announced."""
        ...

    async def close(self) -> None: ...


class WakeBackend:
    """How a committed wake reaches engines and waiters (base class).

    Capability flags say what a backend can do, as ``django.tasks`` backends
    do: ``supports_listen`` (an engine can block on ``listen()`` instead of
    waiting out its poll interval), ``supports_wait_done`` (a caller can
    block on ``wait_done()`` for a run to finish). A backend that cannot do
    either is still useful: it delivers (the Celery backend sends a message
    to the owner's queue).
    """

    #: A short name for logs and checks.
    name: ClassVar[str] = "base"
    supports_listen: ClassVar[bool] = False
    supports_wait_done: ClassVar[bool] = False

    def deliver(self, wake: Wake) -> None:
        """Send ``wake`` on; called after the announcing transaction committed."""
        raise NotImplementedError

    def deliver_many(self, wakes: list[Wake]) -> None:
        """Send several wakes of one transaction (a bulk operation); one
        ``deliver`` each unless the backend can do better (NOTIFY: one statement)."""
        for wake in wakes:
            self.deliver(wake)

    def available(self, using: str) -> bool:
        """Whether this backend works for database alias ``using`` (e.g. NOTIFY
        needs PostgreSQL). ``deliver``/``listen``/``wait_done`` are only called
        when this is true."""
        return True

    def in_statement(self, wake: Wake) -> tuple[str, str] | None:
        """``(channel, payload)`` of a ``pg_notify`` the announcing write may
        send in its own statement instead of ``deliver`` (PostgreSQL delivers
        it only on commit, as ``on_commit`` would); ``None``: deliver only."""
        return None

    def listen(
        self,
        using: str,
        on_wake: Callable[[], None],
        on_pickup: Callable[[], None] | None = None,
    ) -> Listening | None:
        """Call ``on_wake()`` whenever a wake may concern an engine -- or
        ``on_pickup()``, when given, for a wake that only made a run pending
        (``Wake.is_pickup``: the engine need only pick up); ``None`` when
        this backend cannot listen."""
        return None

    def wait_done(self, using: str, run_id: str, timeout: float) -> bool:
        """Block up to ``timeout`` s for ``run_id`` to be announced finished.
        ``False`` on timeout (or when unsupported: the caller polls)."""
        waiter = self.done_waiter(using, run_id)
        if waiter is None:
            return False
        try:
            return waiter.wait(timeout)
        finally:
            waiter.close()

    def done_waiter(self, using: str, run_id: str) -> DoneWaiter | None:
        """Start listening for ``run_id``'s finish (``supports_wait_done``);
        ``None`` when unsupported."""
        return None

    async def open_async_done_waiter(self, using: str, run_id: str) -> AsyncDoneWaiter | None:
        """``done_waiter`` for an async caller, opened on the running loop;
        ``None`` when unsupported or unreachable now (the caller polls)."""
        return None

    def check(self) -> list[CheckMessage]:
        """System-check messages about this backend's configuration."""
        return []


class WakeBackends:
    """The installed backends of this process (one object owns the list)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._backends: list[WakeBackend] = []

    def install(self, backend: WakeBackend) -> WakeBackend:
        """Add ``backend`` (idempotent by identity, and by class for a second
        instance of the same class: the first one stays)."""
        with self._lock:
            if not any(b is backend or type(b) is type(backend) for b in self._backends):
                self._backends.append(backend)
            return next(b for b in self._backends if type(b) is type(backend))

    def uninstall(self, backend_or_class: WakeBackend | type[WakeBackend]) -> None:
        with self._lock:
            self._backends = [
                b
                for b in self._backends
                if not (b is backend_or_class or type(b) is backend_or_class)
            ]

    def all(self) -> tuple[WakeBackend, ...]:
        with self._lock:
            return tuple(self._backends)

    def for_alias(self, using: str) -> tuple[WakeBackend, ...]:
        return tuple(b for b in self.all() if _available(b, using))

    def in_statement(self, wake: Wake) -> tuple[str, tuple[str, str]] | None:
        """The first backend that can ride ``wake`` in the write's own
        statement: its name and ``(channel, payload)``; ``None`` when none can."""
        for backend in self.for_alias(wake.using):
            sent = backend.in_statement(wake)
            if sent is not None:
                return backend.name, sent
        return None

    def deliver_now(self, wake: Wake) -> None:
        """Deliver ``wake`` to every backend (errors logged, never raised)."""
        for backend in self.for_alias(wake.using):
            if backend.name in wake.delivered_by:
                continue
            try:
                backend.deliver(wake)
            except Exception:  # a lost wake costs one polling interval, never correctness
                logger.warning(
                    "wake backend %s failed for %s of run %s",
                    backend.name,
                    wake.event,
                    wake.run_id,
                    exc_info=True,
                )

    def deliver_many_now(self, wakes: list[Wake]) -> None:
        """``deliver_now`` of several wakes of one alias, each backend once."""
        if not wakes:
            return
        for backend in self.for_alias(wakes[0].using):
            mine = [w for w in wakes if backend.name not in w.delivered_by]
            if not mine:
                continue
            try:
                backend.deliver_many(mine)
            except Exception:  # as deliver_now: polling finds what a lost wake missed
                logger.warning(
                    "wake backend %s failed for %d wakes", backend.name, len(mine), exc_info=True
                )

    def listen(
        self,
        using: str,
        on_wake: Callable[[], None],
        on_pickup: Callable[[], None] | None = None,
    ) -> list[Listening]:
        handles = []
        for backend in self.for_alias(using):
            if backend.supports_listen:
                handle = backend.listen(using, on_wake, on_pickup)
                if handle is not None:
                    handles.append(handle)
        return handles

    def done_waiter(self, using: str, run_id: str) -> DoneWaiter | None:
        """The first supporting backend's ``DoneWaiter``; ``None`` when none does."""
        for backend in self.for_alias(using):
            if backend.supports_wait_done:
                return backend.done_waiter(using, run_id)
        return None

    async def open_async_done_waiter(self, using: str, run_id: str) -> AsyncDoneWaiter | None:
        """The first supporting backend's async waiter; ``None`` when none has
        one now (the caller polls)."""
        for backend in self.for_alias(using):
            if backend.supports_wait_done:
                opened = await backend.open_async_done_waiter(using, run_id)
                if opened is not None:
                    return opened
        return None


def _available(backend: WakeBackend, using: str) -> bool:
    try:
        return backend.available(using)
    except Exception:
        logger.warning("wake backend %s: availability check failed", backend.name, exc_info=True)
        return False


backends = WakeBackends()
"""This process's installed wake backends."""


def announce(wake: Wake) -> None:
    """THE post-commit call: deliver ``wake`` once the current transaction of
    ``wake.using`` commits (at once outside a transaction)."""
    if not any(b.name not in wake.delivered_by for b in backends.for_alias(wake.using)):
        return
    transaction.on_commit(lambda: backends.deliver_now(wake), using=wake.using)


def announce_many(wakes: list[Wake]) -> None:
    """``announce`` of many wakes of one alias (a bulk operation's chunk): one
    post-commit callback, and each backend gets them in one ``deliver_many``."""
    if not wakes:
        return
    using = wakes[0].using
    if not backends.for_alias(using):
        return
    batch = list(wakes)
    transaction.on_commit(lambda: backends.deliver_many_now(batch), using=using)


def announce_event(
    event: WakeSubject,
    run_id: Any,
    using: str,
    *,
    workflow_id: str | None = None,
    start_at: int | None = None,
) -> None:
    """``announce(Wake(...))`` for a run id that may be ``None`` (nothing to wake)."""
    if run_id is None:
        return
    announce(Wake(event, str(run_id), using, workflow_id, start_at))


__all__ = [
    "Listening",
    "Wake",
    "WakeBackend",
    "WakeBackends",
    "WakeSubject",
    "announce",
    "announce_event",
    "announce_many",
    "backends",
]
