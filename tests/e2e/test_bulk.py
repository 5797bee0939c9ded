"""``client.cancel_many`` / ``resume_many`` / ``retry_many`` (issue #20 part 3),
on SQLite and PostgreSQL, at test scale (10,000 runs: ``test_bulk_10k``).

What could fail: a run changed outside the fence (its claim not rotated, so
its owner's next write still lands), a chunk half-written, a rerun that
fails or changes a run twice, a dry run that writes, an empty filter acting
on every run, a cancel that leaves a live child behind, a retry that makes
two live runs of one workflow id, a lost race that raises instead of
falling back to the per-run path, statements that grow with the runs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from weft_django import client, workflow
from weft_django.engine.operations import bulk as bulk_module
from weft_django.engine.runs.filters import InvalidRunFilter, RunFilter
from weft_django.models import ClaimEvent, JournalEntry, WorkflowClaim, WorkflowRun
from weft_django.ownership.batch import BatchResult

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def declared(settings: Any) -> None:
    settings.WEFT = {**getattr(settings, "WEFT", {}), "SEARCH_ATTRIBUTES": {"batch": "str"}}


@workflow(name="bk-wait")
def bk_wait(ctx: Any, data: Any) -> Any:
    if data is not None:
        ctx.upsert_search_attributes(batch=data)
    yield ctx.wait_for_signal("go")
    return "done"


@workflow(name="bk-graceful", cancel_grace=timedelta(seconds=30))
def bk_graceful(ctx: Any, data: Any) -> Any:
    yield ctx.wait_for_signal("go")


@workflow(name="bk-parent")
def bk_parent(ctx: Any, data: Any) -> Any:
    yield ctx.start_child("bk-wait", None, workflow_id=f"{ctx.workflow_id}-child")


FAILURES: dict[str, int] = {}


@workflow(name="bk-fail")
def bk_fail(ctx: Any, data: Any) -> Any:
    yield ctx.sleep(0)
    raise ValueError(f"boom {data}")


def _start(env: Any, count: int, prefix: str, batch: str | None = None) -> list[str]:
    ids = [f"{prefix}-{i}" for i in range(count)]
    for wid in ids:
        client.start("bk-wait", batch, workflow_id=wid)
    env.run_until_idle()
    return ids


def _statuses(prefix: str) -> dict[str, str]:
    return dict(
        WorkflowRun.objects.filter(workflow_id__startswith=prefix).values_list(
            "workflow_id", "status"
        )
    )


def test_cancel_many_by_attribute_rotates_each_claim(weft_env: Any) -> None:
    acme = _start(weft_env, 6, "bk-a", "acme")
    other = _start(weft_env, 3, "bk-o", "other")
    epochs = dict(WorkflowClaim.objects.values_list("workflow_id", "epoch"))
    seen: list[tuple[int, int]] = []
    result = client.cancel_many(
        RunFilter(attributes={"batch": "acme"}),
        reason="bad batch",
        chunk_size=4,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert (result.action, result.matched, result.changed, result.skipped) == ("cancel", 6, 6, 0)
    assert result.chunks == 2 and not result.dry_run
    assert seen == [(4, 6), (6, 6)]
    assert set(_statuses("bk-a").values()) == {"cancelled"}
    assert set(_statuses("bk-o").values()) == {"parked"}
    for wid in acme:
        run = WorkflowRun.objects.get(workflow_id=wid)
        assert run.error == {"type": "Cancelled", "message": "bad batch"}
        assert run.finished_at is not None
        claim = WorkflowClaim.objects.get(pk=wid)
        assert claim.epoch == epochs[wid] + 1 and claim.engine_id is None
        event = ClaimEvent.objects.filter(workflow_id=wid).latest("id")
        assert (event.kind, event.epoch, event.reason) == ("rotate", epochs[wid] + 1, "bad batch")
    for wid in other:
        assert WorkflowClaim.objects.get(pk=wid).epoch == epochs[wid]
    # Idempotent: the rerun finds them ended.
    again = client.cancel_many(RunFilter(attributes={"batch": "acme"}))
    assert (again.matched, again.changed, again.skipped) == (6, 0, 6)
    # The engine that held them drives nothing more, and nothing breaks.
    weft_env.run_until_idle()
    assert set(_statuses("bk-a").values()) == {"cancelled"}


def test_dry_run_counts_and_changes_nothing(weft_env: Any) -> None:
    _start(weft_env, 4, "bk-d")
    client.cancel("bk-d-0")
    before = list(WorkflowRun.objects.order_by("pk").values_list("pk", "status", "version"))
    events = ClaimEvent.objects.count()
    result = client.cancel_many(RunFilter(workflow=("bk-wait",)), dry_run=True)
    assert (result.matched, result.changed, result.skipped, result.dry_run) == (4, 3, 1, True)
    assert result.chunks == 0
    assert list(WorkflowRun.objects.order_by("pk").values_list("pk", "status", "version")) == before
    assert ClaimEvent.objects.count() == events
    assert client.retry_many(RunFilter(workflow_id=("bk-d-0",)), dry_run=True).changed == 0
    assert client.resume_many(RunFilter(status=("parked",)), dry_run=True).skipped == 3


def test_an_empty_filter_needs_allow_all(weft_env: Any) -> None:
    _start(weft_env, 2, "bk-e")
    for fn in (client.cancel_many, client.resume_many, client.retry_many):
        with pytest.raises(InvalidRunFilter, match="matches every run") as info:
            fn(RunFilter())
        assert info.value.key == "all"
    assert set(_statuses("bk-e").values()) == {"parked"}
    result = client.cancel_many(RunFilter(), allow_all=True)
    assert result.changed == 2 and set(_statuses("bk-e").values()) == {"cancelled"}
    with pytest.raises(TypeError, match="RunFilter"):
        client.cancel_many({"status": "parked"})  # type: ignore[arg-type]


def test_cancel_many_ends_live_descendants(weft_env: Any) -> None:
    for i in range(3):
        client.start("bk-parent", None, workflow_id=f"bk-p{i}")
    weft_env.run_until_idle()
    assert set(_statuses("bk-p").values()) == {"parked"}
    result = client.cancel_many(RunFilter(workflow=("bk-parent",)))
    assert (result.changed, result.cascaded) == (3, 3)
    children = WorkflowRun.objects.filter(workflow_id__endswith="-child")
    assert {c.status for c in children} == {"cancelled"}
    assert {c.error["message"] for c in children} == {
        f"parent bk-p{i} was cancelled" for i in range(3)
    }
    assert WorkflowClaim.objects.get(pk="bk-p0-child").engine_id is None
    weft_env.run_until_idle()


def test_a_graceful_cancel_is_requested_once(weft_env: Any) -> None:
    client.start("bk-graceful", None, workflow_id="bk-g")
    weft_env.run_until_idle()
    first = client.cancel_many(RunFilter(workflow=("bk-graceful",)))
    run = WorkflowRun.objects.get(workflow_id="bk-g")
    assert first.changed == 1 and run.cancel_requested_at is not None
    again = client.cancel_many(RunFilter(workflow=("bk-graceful",)))
    assert (again.changed, again.skipped) == (0, 1)
    # The engine that held it takes it back after one renew interval (cooldown).
    weft_env.run_until_idle()
    weft_env.advance(weft_env.engine.settings.claim_renew_interval_ms / 1000)
    weft_env.run_until_idle()
    assert WorkflowRun.objects.get(workflow_id="bk-g").status == "cancelled"


def test_resume_many(weft_env: Any) -> None:
    ids = _start(weft_env, 5, "bk-r")
    for wid in ids[:3]:
        client.suspend(wid)
    result = client.resume_many(RunFilter(workflow_id=tuple(ids)))
    assert (result.matched, result.changed, result.skipped) == (5, 3, 2)
    assert sorted(_statuses("bk-r").values()) == [
        "parked",
        "parked",
        "pending",
        "pending",
        "pending",
    ]
    weft_env.run_until_idle()
    assert set(_statuses("bk-r").values()) == {"parked"}
    client.signal(ids[0], "go", None)
    weft_env.run_until_idle()
    assert client.get_handle(ids[0]).result(timeout=5) == "done"


def test_retry_many_drops_trailing_errors_and_skips_superseded_runs(weft_env: Any) -> None:
    for i in range(3):
        client.start("bk-fail", i, workflow_id=f"bk-f{i}")
    weft_env.run_until_idle()
    # bk-f0's failed run is superseded by a newer (failed) run of the same id.
    client.start("bk-fail", 9, workflow_id="bk-f0", on_conflict="start-new")
    weft_env.run_until_idle()
    assert set(_statuses("bk-f").values()) == {"failed"}
    journal = {
        str(pk): list(JournalEntry.objects.filter(run_id=pk).values_list("kind", flat=True))
        for pk in WorkflowRun.objects.values_list("pk", flat=True)
    }
    result = client.retry_many(RunFilter(workflow=("bk-fail",)), chunk_size=2)
    assert (result.matched, result.changed, result.skipped) == (4, 3, 1)
    assert WorkflowRun.objects.filter(status="pending").count() == 3
    old = WorkflowRun.objects.filter(workflow_id="bk-f0").order_by("created_at").first()
    assert old is not None and old.status == "failed"
    # The sleep's entry (no error) stays; nothing after it had an error to drop
    # except what the journal held -- each retried run re-runs from its last good entry.
    for run in WorkflowRun.objects.filter(status="pending"):
        kinds = list(JournalEntry.objects.filter(run=run).values_list("kind", flat=True))
        assert kinds == [k for k in journal[str(run.pk)] if k == "sleep"]
        assert run.error is None and run.finished_at is None
    weft_env.run_until_idle()
    assert WorkflowRun.objects.filter(status="failed").count() == 4


def test_a_lost_race_falls_back_to_the_per_run_path(
    weft_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _start(weft_env, 5, "bk-l")
    client.cancel(ids[1])  # "concurrently": the chunk's read is stale for this one
    real = bulk_module.conditional_batch
    calls = {"n": 0}

    def once_lost(conditions: Any, writes: Any, **kwargs: Any) -> BatchResult:
        calls["n"] += 1
        if calls["n"] == 1:
            return BatchResult(False, next(iter(conditions)))
        return real(conditions, writes, **kwargs)

    monkeypatch.setattr(bulk_module, "conditional_batch", once_lost)
    result = client.cancel_many(RunFilter(workflow_id=tuple(ids)))
    assert (result.changed, result.skipped) == (4, 1)
    assert set(_statuses("bk-l").values()) == {"cancelled"}


def test_an_interrupted_bulk_leaves_runs_done_or_untouched(weft_env: Any) -> None:
    ids = _start(weft_env, 25, "bk-i")

    def stop_after_two(done: int, total: int) -> None:
        if done >= 20:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        client.cancel_many(
            RunFilter(workflow_id=tuple(ids)), chunk_size=10, progress=stop_after_two
        )
    statuses = _statuses("bk-i")
    assert sorted(set(statuses.values())) == ["cancelled", "parked"]
    assert list(statuses.values()).count("cancelled") == 20
    for wid, status in statuses.items():
        run = WorkflowRun.objects.get(workflow_id=wid)
        if status == "parked":  # untouched: same claim, no error
            assert run.error is None and WorkflowClaim.objects.get(pk=wid).engine_id is not None
    rerun = client.cancel_many(RunFilter(workflow_id=tuple(ids)), chunk_size=10)
    assert (rerun.changed, rerun.skipped) == (5, 20)
    assert set(_statuses("bk-i").values()) == {"cancelled"}


@pytest.mark.parametrize("action", ["cancel", "resume"])
def test_statements_grow_with_chunks_not_runs(weft_env: Any, action: str) -> None:
    ids = _start(weft_env, 90, "bk-q")
    if action == "resume":
        for wid in ids:
            client.suspend(wid)
    fn = client.cancel_many if action == "cancel" else client.resume_many

    def statements(chosen: list[str]) -> int:
        with CaptureQueriesContext(connection) as captured:
            result = fn(RunFilter(workflow_id=tuple(chosen)), chunk_size=30)
        assert result.changed == len(chosen)
        return len(captured)

    one_chunk = statements(ids[:30])
    two_chunks = statements(ids[30:])  # 60 runs
    print(f"{action}: {one_chunk} statements for 30 runs, {two_chunks} for 2 x 30")
    assert one_chunk < 30, one_chunk  # far fewer than one statement per run
    # A chunk more costs about one chunk's statements more, not 30 runs' worth.
    assert two_chunks <= 2 * one_chunk + 2, (one_chunk, two_chunks)


def test_a_chunk_announces_each_run_once_after_its_commit(weft_env: Any) -> None:
    """The wakes of a chunk go out together, after the commit: every cancelled
    run is announced finished (one NOTIFY statement per chunk on PostgreSQL),
    every resumed run as a pickup of its workflow id."""
    from weft_django.engine.wakes import Wake, WakeBackend, backends

    class Recording(WakeBackend):
        name = "recording"

        def __init__(self) -> None:
            self.batches: list[list[Wake]] = []

        def deliver(self, wake: Wake) -> None:
            self.batches.append([wake])

        def deliver_many(self, wakes: list[Wake]) -> None:
            self.batches.append(list(wakes))

    ids = _start(weft_env, 5, "bk-w")
    recording = backends.install(Recording())
    try:
        listener = None
        if connection.vendor == "postgresql":
            import psycopg

            params = connection.get_connection_params()
            for private in (
                "cursor_factory",
                "context",
                "prepare_threshold",
                "server_side_binding",
            ):
                params.pop(private, None)
            listener = psycopg.connect(autocommit=True, **params)
            listener.execute("LISTEN weft_done")
            listener.execute("LISTEN weft_wake")
        client.cancel_many(RunFilter(workflow_id=tuple(ids[:3])), chunk_size=2)
        for wid in ids[3:]:
            client.suspend(wid)
        recording.batches.clear()
        client.resume_many(RunFilter(workflow_id=tuple(ids[3:])))
        if listener is not None:
            payloads = {n.payload for n in listener.notifies(timeout=1.0, stop_after=7)}
            listener.close()
            cancelled = {str(WorkflowRun.objects.get(workflow_id=w).pk) for w in ids[:3]}
            assert cancelled <= payloads
            assert {f"pickup {w}" for w in ids[3:]} <= payloads
    finally:
        backends.uninstall(Recording)
    assert [sorted((w.event, w.workflow_id) for w in batch) for batch in recording.batches] == [
        [("resume", ids[3]), ("resume", ids[4])]
    ]
