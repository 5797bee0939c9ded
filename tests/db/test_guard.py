"""The wake guard (SPEC §4.7): no stale wake drives a workflow.

Invariants protected: a wake proceeds only when the stored holder is this
engine AT the generation the wake was scheduled under (engine id *and*
epoch, so an engine that released and re-acquired the same id cannot be
driven by its old wake -- ABA); every discard warns with the workflow id and
wake kind; modes without per-workflow claims proceed without touching the
database; a failed re-read proceeds (the fenced write is the backstop); each
decision is counted by kind, decision and transport.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from tests.support import ManualClock, StaticHost
from weft_django.models import WorkflowClaim
from weft_django.ownership import guard as guard_module
from weft_django.ownership.guard import (
    WAKE_KINDS,
    confirm_wake_ownership,
    wake_ownership_check,
)
from weft_django.ownership.registry import ClaimRegistry
from weft_django.warnings import WeftWorkflowWakeDiscardedWarning

pytestmark = pytest.mark.django_db(transaction=True)


def _check(workflow_id: str = "wf", *, engine_id: str = "engine-a", epoch: int = 1, kind="sleep"):
    return wake_ownership_check(
        workflow_id=workflow_id,
        wake_kind=kind,
        expected_engine_id=engine_id,
        expected_epoch=epoch,
    )


def _wakes(host: StaticHost) -> dict:
    return dict(host.metrics.snapshot().wakes)


def test_wake_kinds_are_weft_six() -> None:
    assert WAKE_KINDS == (
        "sleep",
        "wait-condition",
        "signal",
        "async-activity",
        "child-completion",
        "drive",
    )


# -- wake_ownership_check -------------------------------------------------------


def test_match_when_engine_and_epoch_agree(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    host.registry.acquire("wf")
    result = _check()
    assert result.status == "match"
    assert result.as_dict() == {"status": "match"}


@pytest.mark.parametrize("kind", WAKE_KINDS)
def test_absent_holder_of_a_never_seen_id_is_discarded(kind: str) -> None:
    with pytest.warns(WeftWorkflowWakeDiscardedWarning) as record:
        result = _check("never", kind=kind)
    assert result.as_dict() == {
        "status": "discarded",
        "reason": "holder-absent",
        "observed_engine_id": None,
        "observed_epoch": None,
    }
    (warning,) = record
    assert (warning.message.workflow_id, warning.message.wake_kind) == ("never", kind)


def test_released_holder_is_absent(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    host.registry.acquire("wf")
    host.registry.release("wf")
    with pytest.warns(WeftWorkflowWakeDiscardedWarning):
        assert _check().reason == "holder-absent"


@pytest.mark.parametrize(
    ("epoch", "engine_id", "expires_at", "claimed_at"),
    [
        (1, "", 10, 10),
        (1, "engine-a", -5, 10),
        (1, "engine-a", None, None),
        (-1, "engine-a", 10, 10),
        (0, "engine-a", 10, 10),
    ],
)
def test_undecodable_holder_is_discarded(epoch, engine_id, expires_at, claimed_at) -> None:
    WorkflowClaim.objects.create(
        workflow_id="wf",
        epoch=epoch,
        engine_id=engine_id,
        expires_at=expires_at,
        claimed_at=claimed_at,
    )
    with pytest.warns(WeftWorkflowWakeDiscardedWarning) as record:
        result = _check(epoch=epoch, kind="signal")
    assert (result.status, result.reason) == ("discarded", "holder-undecodable")
    assert (result.observed_engine_id, result.observed_epoch) == (None, None)
    assert record[0].message.wake_kind == "signal"


def test_other_engine_is_a_generation_mismatch(clock: ManualClock) -> None:
    other = StaticHost("engine-b", clock)
    other.registry.acquire("wf")
    with pytest.warns(WeftWorkflowWakeDiscardedWarning) as record:
        result = _check(kind="child-completion")
    assert result.as_dict() == {
        "status": "discarded",
        "reason": "generation-mismatch",
        "observed_engine_id": "engine-b",
        "observed_epoch": 1,
    }
    assert (record[0].message.workflow_id, record[0].message.wake_kind) == (
        "wf",
        "child-completion",
    )


def test_same_engine_at_an_older_epoch_is_a_mismatch_aba(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    host.registry.acquire("wf")
    host.registry.release("wf")
    host.registry.acquire("wf")  # same engine, epoch 2
    with pytest.warns(WeftWorkflowWakeDiscardedWarning):
        result = _check(epoch=1)
    assert (result.reason, result.observed_engine_id, result.observed_epoch) == (
        "generation-mismatch",
        "engine-a",
        2,
    )
    assert _check(epoch=2).status == "match"


# -- confirm_wake_ownership -----------------------------------------------------


@pytest.mark.parametrize("mode", ["none", "lease"])
def test_modes_without_claims_proceed_without_any_query(clock: ManualClock, mode: str) -> None:
    host = StaticHost("engine-a", clock, ownership=mode)
    with CaptureQueriesContext(connection) as queries:
        for kind in WAKE_KINDS:
            assert confirm_wake_ownership(host, "wf", kind, 1) == "proceed"
    assert len(queries) == 0
    assert _wakes(host)[("sleep", "proceed", "local")] == 1


def test_nothing_tracked_discards_without_a_query(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    with (
        CaptureQueriesContext(connection) as queries,
        pytest.warns(WeftWorkflowWakeDiscardedWarning) as record,
    ):
        assert confirm_wake_ownership(host, "wf", "sleep") == "discard"
    assert len(queries) == 0
    assert (record[0].message.workflow_id, record[0].message.wake_kind) == ("wf", "sleep")
    assert _wakes(host) == {("sleep", "discard", "local"): 1}


def test_standalone_engine_discards_an_untracked_wake_even_if_the_row_names_it(
    clock: ManualClock,
) -> None:
    """A standalone engine that forgot a claim must not be driven by its old wake."""
    host = StaticHost("engine-a", clock)
    host.registry.acquire("wf")
    host.registry.forget("wf")  # e.g. a fenced write failed, or shutdown dropped it
    with pytest.warns(WeftWorkflowWakeDiscardedWarning):
        assert confirm_wake_ownership(host, "wf", "sleep", 1) == "discard"


def test_tracked_and_matching_proceeds(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    host.registry.acquire("wf")
    with CaptureQueriesContext(connection) as queries:
        assert confirm_wake_ownership(host, "wf", "sleep") == "proceed"
        assert confirm_wake_ownership(host, "wf", "async-activity", 1) == "proceed"
    assert len(queries) == 2
    assert _wakes(host) == {
        ("sleep", "proceed", "local"): 1,
        ("async-activity", "proceed", "local"): 1,
    }


def test_tracked_but_taken_over_discards(clock: ManualClock) -> None:
    a, b = StaticHost("engine-a", clock), StaticHost("engine-b", clock)
    a.registry.acquire("wf")
    clock.advance(a.settings.claim_ttl_ms + 2 * a.settings.claim_renew_interval_ms + 1)
    b.registry.takeover("wf")
    with pytest.warns(WeftWorkflowWakeDiscardedWarning) as record:
        assert confirm_wake_ownership(a, "wf", "wait-condition") == "discard"
    assert record[0].message.wake_kind == "wait-condition"
    assert _wakes(a) == {("wait-condition", "discard", "local"): 1}


def test_an_older_generation_wake_is_discarded_after_reacquire(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    host.registry.acquire("wf")
    host.registry.release("wf")
    host.registry.acquire("wf")
    with pytest.warns(WeftWorkflowWakeDiscardedWarning):
        assert confirm_wake_ownership(host, "wf", "sleep", expected_epoch=1) == "discard"
    assert confirm_wake_ownership(host, "wf", "sleep", expected_epoch=2) == "proceed"


def test_a_message_naming_another_engine_is_discarded(clock: ManualClock) -> None:
    host = StaticHost("node-1", clock)
    host.registry.acquire("wf")
    with (
        CaptureQueriesContext(connection) as queries,
        pytest.warns(WeftWorkflowWakeDiscardedWarning) as record,
    ):
        decision = confirm_wake_ownership(
            host, "wf", "signal", 1, expected_engine_id="node-2", transport="celery"
        )
    assert decision == "discard"
    assert len(queries) == 0
    assert (record[0].message.workflow_id, record[0].message.wake_kind) == ("wf", "signal")
    assert _wakes(host) == {("signal", "discard", "celery"): 1}


def test_celery_node_confirms_a_claim_taken_by_a_sibling_process(clock: ManualClock) -> None:
    settings = StaticHost("x", clock).settings

    def node_registry() -> ClaimRegistry:
        return ClaimRegistry(
            engine_id="node-1",
            clock=clock,
            claim_ttl_ms=settings.claim_ttl_ms,
            claim_renew_interval_ms=settings.claim_renew_interval_ms,
            renew_scope="engine",
        )

    sibling = node_registry()
    sibling.acquire("wf")
    host = StaticHost("node-1", clock, registry=node_registry())
    decision = confirm_wake_ownership(
        host, "wf", "sleep", 1, expected_engine_id="node-1", transport="celery"
    )
    assert decision == "proceed"
    with pytest.warns(WeftWorkflowWakeDiscardedWarning):
        assert confirm_wake_ownership(host, "wf", "sleep", 2, expected_engine_id="node-1") == (
            "discard"
        )


def test_a_failed_re_read_proceeds(clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    host = StaticHost("engine-a", clock)
    host.registry.acquire("wf")

    def blip(**kwargs):
        raise DatabaseError("server closed the connection unexpectedly")

    monkeypatch.setattr(guard_module, "wake_ownership_check", blip)
    assert confirm_wake_ownership(host, "wf", "sleep") == "proceed"
    assert _wakes(host) == {("sleep", "proceed", "local"): 1}


def test_an_unknown_transport_does_not_break_the_decision(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    host.registry.acquire("wf")
    assert confirm_wake_ownership(host, "wf", "sleep", transport="pigeon") == "proceed"
    assert _wakes(host) == {}
