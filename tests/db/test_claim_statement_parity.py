"""The one-statement claim CAS and the general executor are the same batch.

Invariants protected:
- a bare claim transition (acquire from a missing row and from a released
  one, takeover, release, rotation) writes the same claim row and the same
  ``ClaimEvent`` row whether ``conditional_batch`` runs it as the vendor's
  one statement (PostgreSQL) or through the general executor (``SELECT …
  FOR UPDATE``, compare, ``UPDATE``, ``INSERT`` in one transaction);
- a stale read (an epoch another engine has moved) is refused by both,
  naming the same condition, and neither writes anything;
- the transitions' ``ClaimEvent`` rows, built positionally for speed, are
  exactly what the keyword constructor builds;
- ``db.ops(alias)`` is cached per alias and forgets it when ``DATABASES``
  is overridden.

On SQLite both runs take the general executor: the test still pins that the
rows do not depend on which path wrote them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from weft_django import db as store
from weft_django.models import ClaimEvent, WorkflowClaim
from weft_django.ownership import transitions
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.codec import HolderRecord
from weft_django.ownership.transitions import (
    ClaimSnapshot,
    Transition,
    build_acquire,
    build_release,
    build_rotation,
    build_takeover,
)

pytestmark = pytest.mark.usefixtures("batch_db")

NOW = 1_000_000
TTL = 30_000
EVENT_COLUMNS = (
    "workflow_id",
    "epoch",
    "engine_id",
    "kind",
    "at_ms",
    "reason",
    "previous_engine_id",
    "previous_expires_at",
)


def _snapshot(workflow_id: str) -> ClaimSnapshot:
    row = WorkflowClaim.objects.filter(pk=workflow_id).values_list(
        "epoch", "engine_id", "expires_at", "claimed_at"
    )
    found = list(row)
    return ClaimSnapshot(workflow_id, *found[0]) if found else ClaimSnapshot(workflow_id)


def _state(workflow_id: str) -> tuple[Any, list[tuple[Any, ...]]]:
    claim = list(
        WorkflowClaim.objects.filter(pk=workflow_id).values_list(
            "epoch", "engine_id", "expires_at", "claimed_at"
        )
    )
    events = list(
        ClaimEvent.objects.filter(workflow_id=workflow_id)
        .order_by("id")
        .values_list(*EVENT_COLUMNS)
    )
    return claim, events


def _held(snapshot: ClaimSnapshot) -> HolderRecord:
    holder = snapshot.holder
    assert holder is not None
    return holder


#: Each step builds its transition from a fresh read of the row.
STEPS: list[tuple[str, Callable[[ClaimSnapshot], Transition]]] = [
    ("acquire (no row yet)", lambda s: build_acquire(s, engine_id="e-1", now=NOW, ttl_ms=TTL)),
    (
        "release",
        lambda s: build_release(s.workflow_id, _held(s), now=NOW + 1, reason="done"),
    ),
    ("acquire", lambda s: build_acquire(s, engine_id="e-2", now=NOW + 2, ttl_ms=TTL)),
    ("takeover", lambda s: build_takeover(s, engine_id="e-3", now=NOW + 3, ttl_ms=TTL)),
    (
        "owner release",
        lambda s: build_release(s.workflow_id, _held(s), now=NOW + 4, exact=False),
    ),
    ("rotation", lambda s: build_rotation(s, actor="ops", now=NOW + 5, reason="cancel")),
]


def _run_steps(workflow_id: str) -> list[Any]:
    seen: list[Any] = []
    for _, build in STEPS:
        transition = build(_snapshot(workflow_id))
        result = conditional_batch(transition.conditions, transition.writes)
        assert result.committed
        seen.append(_state(workflow_id))
    return seen


@pytest.fixture
def general_executor(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Switch the one-statement path off for the rest of the test."""

    def switch_off() -> None:
        monkeypatch.setattr(store.ops("default"), "supports_claim_statement", False)

    return switch_off


def _renamed(states: list[Any], old: str, new: str) -> list[Any]:
    def rename(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(new if value == old else value for value in row)

    return [([rename(c) for c in claim], [rename(e) for e in events]) for claim, events in states]


def test_both_paths_write_the_same_rows(general_executor: Callable[[], None]) -> None:
    fast = _run_steps("wf-fast")
    general_executor()
    general = _run_steps("wf-general")
    assert _renamed(fast, "wf-fast", "x") == _renamed(general, "wf-general", "x")
    # The last state: rotated at epoch 4, no holder; six events in order.
    claim, events = fast[-1]
    assert claim == [(4, None, None, None)]
    assert [e[3] for e in events] == [
        "acquire",
        "release",
        "acquire",
        "takeover",
        "release",
        "rotate",
    ]


@pytest.mark.parametrize("path", ["one statement", "general executor"])
@pytest.mark.parametrize("step", ["acquire", "takeover", "release", "rotation"])
def test_a_stale_epoch_is_refused_alike_and_writes_nothing(
    path: str, step: str, general_executor: Callable[[], None]
) -> None:
    if path == "general executor":
        general_executor()
    wid = f"stale-{step}"
    first = build_acquire(ClaimSnapshot(wid), engine_id="e-1", now=NOW, ttl_ms=TTL)
    assert conditional_batch(first.conditions, first.writes).committed
    if step == "acquire":  # released, read, then someone else acquires and releases
        release = build_release(wid, _held(_snapshot(wid)), now=NOW + 1)
        assert conditional_batch(release.conditions, release.writes).committed
    stale_read = _snapshot(wid)
    # Another engine moves the epoch under the read (takeover, then release).
    other = build_takeover(stale_read, engine_id="e-9", now=NOW + 2, ttl_ms=TTL)
    if step == "acquire":
        other = build_acquire(stale_read, engine_id="e-9", now=NOW + 2, ttl_ms=TTL)
    assert conditional_batch(other.conditions, other.writes).committed
    before = _state(wid)
    stale = {
        "acquire": lambda: build_acquire(stale_read, engine_id="e-1", now=NOW + 3, ttl_ms=TTL),
        "takeover": lambda: build_takeover(stale_read, engine_id="e-1", now=NOW + 3, ttl_ms=TTL),
        "release": lambda: build_release(wid, _held(stale_read), now=NOW + 3),
        "rotation": lambda: build_rotation(stale_read, actor="ops", now=NOW + 3, reason="x"),
    }[step]()
    result = conditional_batch(stale.conditions, stale.writes)
    assert not result.committed
    assert result.failed_condition is stale.conditions[0]
    assert _state(wid) == before


def test_the_events_built_positionally_are_the_keyword_ones() -> None:
    fields = tuple(f.attname for f in ClaimEvent._meta.concrete_fields)
    assert fields == transitions._EVENT_FIELDS  # else the slower keyword path runs
    snapshot = ClaimSnapshot("wf", 3, "e-old", NOW - 5, NOW - 100)
    built = build_takeover(snapshot, engine_id="e-new", now=NOW, ttl_ms=TTL).writes[1]
    event = built.instance  # type: ignore[attr-defined]
    expected = ClaimEvent(
        workflow_id="wf",
        epoch=4,
        engine_id="e-new",
        kind="takeover",
        at_ms=NOW,
        reason="",
        previous_engine_id="e-old",
        previous_expires_at=NOW - 5,
    )
    assert event.pk is None and event._state.adding
    assert {f: getattr(event, f) for f in fields} == {f: getattr(expected, f) for f in fields}


def test_ops_is_cached_per_alias_and_forgotten_when_databases_change() -> None:
    ops = store.ops("default")
    assert ops is store.vendor_ops(connection.vendor)
    assert store._BY_ALIAS["default"] is ops
    store._on_setting_changed(setting="DATABASES")  # the setting_changed receiver
    assert "default" not in store._BY_ALIAS
    assert store.ops("default") is ops
