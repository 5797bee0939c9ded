"""What ``@activity(atomic=True)`` refuses at definition time, naming the activity.

The refusals follow from how an atomic step runs (``engine.activities.atomic``: in the
turn's own transaction, on the turn thread, on the weft alias). ``definitions`` runs them
when the decorator is applied, without importing that runtime (the ``workflow`` wing sits
below ``activities``), so a mistake fails at import, not inside a turn.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from weft_django.conf import get_settings


def check_atomic_options(
    act_name: str,
    *,
    atomic: bool,
    is_async: bool,
    using: str | None,
    heartbeat_timeout_ms: int | None,
    routed: dict[str, object],
) -> None:
    """Refuse, at definition time, what an atomic activity cannot honour.

    The transaction that makes it exactly-once is the turn's own, on the weft
    alias, on the turn thread (``engine.atomic``): so no event loop (``async
    def``), no other alias, no heartbeat bound (nothing can interrupt the
    body; its ``timeout`` is enforced by the database and at commit), and no
    option that sends the attempt elsewhere. ``routed``: such options
    (name -> value; a ``celery_queue=`` joins here when it exists).
    """
    where = f"activity {act_name!r}"
    if using is not None and not atomic:
        raise TypeError(f"{where}: using= only has a meaning with atomic=True, got using={using!r}")
    if is_async:
        raise TypeError(
            f"{where} is an async def function and cannot be atomic=True: its transaction is "
            "the turn's own, on the turn thread (write a plain function)"
        )
    if heartbeat_timeout_ms is not None:
        raise TypeError(
            f"{where}: heartbeat_timeout cannot be combined with atomic=True (nothing can stop "
            "an atomic body midway; its timeout= rolls it back)"
        )
    for option, value in routed.items():
        if value is not None:
            raise TypeError(
                f"{where}: {option}={value!r} cannot be combined with atomic=True (an atomic "
                "activity runs inside its owner's turn, in one transaction with its result)"
            )
    if using is not None:
        weft_alias = get_settings().database
        if using != weft_alias:
            raise ImproperlyConfigured(
                f"{where}: atomic=True with using={using!r}, but the weft database alias is "
                f"{weft_alias!r} (WEFT['DATABASE']): only writes on that alias commit with "
                "the journal"
            )


__all__ = ["check_atomic_options"]
