"""A renewal pass that runs while a batch pickup's transaction is open loses no claim.

Invariant protected (``fence.commit_with_folds``, ``track=False``): the claims
a batch pickup folds in are tracked by the registry only once the pickup's
transaction has committed. Tracked earlier, a renewal pass in that window
read the claim rows as they were before the pickup (no holder), renewed none
of them and declared them lost; the commit then left them held in the
database by an engine that no longer drove them, so their runs waited
CLAIM_TTL + the takeover grace (about 40 s) for another engine. Seen at 50
engines on 2 cores (``benchmarks/many_engines``: 5 to 7 of 500 runs a burst).

PostgreSQL only (the batch pickup needs ``SKIP LOCKED``).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, connections

from tests.support import ManualClock
from weft_django.engine import Engine
from weft_django.engine.maintenance import pickup
from weft_django.models import WorkflowClaim, WorkflowRun
from weft_django.ownership.results import RenewOutcome

pytestmark = [
    pytest.mark.usefixtures("batch_db"),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the batch pickup needs SKIP LOCKED"
    ),
]


def test_a_renewal_inside_the_pickups_transaction_loses_no_claim(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = Engine("engine-a", clock=clock).boot()
    registry = engine.registry
    assert registry is not None
    during: list[RenewOutcome] = []
    original = pickup.commit_with_claim_fold

    def renew_before_the_commit(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        # The batch's statement ran; the pickup's transaction has not committed.

        def renew() -> None:
            try:
                during.extend(registry.renew_all())
            finally:
                connections.close_all()

        renewer = threading.Thread(target=renew)
        renewer.start()
        renewer.join(30)
        assert not renewer.is_alive(), "the renewal pass hung"
        return result

    monkeypatch.setattr(pickup, "commit_with_claim_fold", renew_before_the_commit)
    try:
        ids = [f"rr-{i}" for i in range(2)]
        for wid in ids:
            WorkflowRun.objects.create(workflow_id=wid, name="three-steps", status="pending")
        got = pickup.pick_up_batch(engine, 10)
        assert sorted(r.workflow_id for r in got.picked) == ids
        assert [o for o in during if o.status == "lost"] == []
        # Held in the database and tracked by the engine alike ...
        for wid in ids:
            claim = WorkflowClaim.objects.get(pk=wid)
            assert (claim.engine_id, claim.epoch) == ("engine-a", 1)
            assert registry.current_epoch(wid) == 1
        # ... so the next renewal pass renews both.
        clock.advance(1_000)
        after = registry.renew_all()
        assert sorted((o.workflow_id, o.status) for o in after) == [(w, "renewed") for w in ids]
        expires = set(WorkflowClaim.objects.filter(pk__in=ids).values_list("expires_at", flat=True))
        assert expires == {clock() + engine.settings.claim_ttl_ms}
    finally:
        engine.dispose(grace=0)
