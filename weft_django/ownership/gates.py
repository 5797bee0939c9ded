"""Start-up gates (SPEC §4.3), run by ``Engine.boot()`` before anything else.

1. Capability: the database can run the conditional batch safely -- the
   configuration first (no connection), then what the live connection's
   ``features.supports_transactions`` says.
2. Mode marker: every engine sharing a store under a fencing mode agrees on
   the mode. Absent → established with a CAS on absence; present and
   different → ``OwnershipModeMismatchError``; present but undecodable →
   an error (never silently re-stamped). A ``none`` engine never writes the
   marker but refuses a store stamped for fencing.
Then a clock check: the engine clock must agree with the database clock
within one renew interval, or expiry judgments would be wrong.

The one write that removes the marker (``reset_mode_marker``, what
``manage.py weft_reset_mode`` runs) is here too, through the conditional
batch: it deletes exactly the marker the operator was shown, or nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

from weft_django import db as store
from weft_django.errors import OwnershipModeMismatchError
from weft_django.models import OwnershipModeMarker
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.codec import MarkerRecord, decode_marker_row
from weft_django.ownership.host import OwnershipHost
from weft_django.ownership.ops import Call, Delete, Insert, RowCondition, UniqueAbsence

FENCING_MODES = ("lease", "workflow-lease")
MARKER_KEY = "marker"


def run_gates(host: OwnershipHost) -> MarkerRecord | None:
    """Run both gates; returns the marker in force (``None`` for ``none``)."""
    mode = host.ownership
    db = host.settings.database
    if mode in FENCING_MODES:
        problems = store.capability_problems(db, mode) or store.transaction_problems(db, mode)
        if problems:
            raise ImproperlyConfigured(
                f"OWNERSHIP={mode!r} needs a database that supports the conditional batch: "
                + "; ".join(p.msg for p in problems)
            )
    return check_mode_marker(host)


def _read_marker(db: str) -> tuple[str, int] | None:
    return (
        OwnershipModeMarker.objects.using(db)
        .filter(pk=MARKER_KEY)
        .values_list("mode", "established_at")
        .first()
    )


def _decode_or_fail(row: tuple[str, int]) -> MarkerRecord:
    marker = decode_marker_row(*row)
    if marker is None:
        raise ImproperlyConfigured(
            f"The store's ownership mode marker exists but does not decode (mode={row[0]!r}, "
            f"established_at={row[1]!r}). It is never re-stamped automatically: stop every "
            "engine and run `manage.py weft_reset_mode`."
        )
    return marker


def check_mode_marker(host: OwnershipHost) -> MarkerRecord | None:
    mode = host.ownership
    db = host.settings.database
    row = _read_marker(db)
    if mode not in FENCING_MODES:
        if row is not None:
            stored = _decode_or_fail(row)
            raise OwnershipModeMismatchError(mode, stored.mode, stored.established_at)
        return None
    if row is None:
        absence = UniqueAbsence("ownership-mode-marker")
        now = host.now_ms()
        conditional_batch(
            [absence],
            [Insert(OwnershipModeMarker(mode=mode, established_at=now), absence)],
            using=db,
        )
        row = _read_marker(db)
        if row is None:
            raise ImproperlyConfigured(
                "Lost the compare-and-swap while establishing the store's ownership mode "
                "marker, and it is absent again: it was deleted concurrently."
            )
    marker = _decode_or_fail(row)
    if marker.mode != mode:
        raise OwnershipModeMismatchError(mode, marker.mode, marker.established_at)
    return marker


def reset_mode_marker(
    db: str,
    mode: str,
    established_at: int,
    *,
    recheck: Callable[[str], None] | None = None,
) -> bool:
    """Delete the marker ``(mode, established_at)``; ``False`` when it changed
    (or vanished) meanwhile and nothing was deleted.

    ``recheck(db)`` runs inside the batch, with the marker row locked, before
    the delete; raising from it aborts the reset (the command re-checks there
    that no engine is alive).
    """
    writes: list[Call | Delete] = [] if recheck is None else [Call(recheck)]
    writes.append(Delete(OwnershipModeMarker, {"pk": MARKER_KEY}))
    result = conditional_batch(
        [
            RowCondition(
                OwnershipModeMarker,
                MARKER_KEY,
                {"mode": mode, "established_at": established_at},
                label="ownership-mode-marker",
            )
        ],
        writes,
        using=db,
    )
    return result.committed


def database_clock_ms(db: str) -> int | None:
    """The database server's clock in ms, or ``None`` when it has none (SQLite)."""
    return store.ops(db).database_clock_ms(db)


def check_clock_skew(host: OwnershipHost) -> int | None:
    """Refuse to start when engine and database clocks differ by > renew interval."""
    if host.uses_injected_clock:
        return None
    db = host.settings.database
    before = host.now_ms()
    db_now = database_clock_ms(db)
    if db_now is None:
        return None
    after = host.now_ms()
    skew = db_now - (before + after) // 2
    limit = host.settings.claim_renew_interval_ms
    if abs(skew) > limit:
        raise ImproperlyConfigured(
            f"The engine clock differs from the database clock by {skew} ms, more than "
            f"CLAIM_RENEW_INTERVAL ({limit} ms); fix NTP before starting engines."
        )
    return skew
