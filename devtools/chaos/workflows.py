"""Workflows of the chaos soak, loaded by the harness and by every engine
(``python -m tests.procs.worker devtools.chaos.workflows weft_worker ...`` for a
standalone engine, ``celery worker -I devtools.chaos.workflows`` for a node).

Between them they use every ``ctx`` command: activities (one slow enough to
be killed inside, one that fails once and is retried on a durable timer),
``sleep``, ``wait_for_signal`` (delivered, buffered before the wait, and one
that times out), ``on_signal`` + ``wait_until``, ``async_activity`` (its
token handed out as a ``SideEffect`` row the harness completes), children
through ``start_child``, ``all`` and ``race``, ``now`` / ``uuid4`` /
``random``, ``patched`` and ``continue_as_new``. Their results depend only on
their input and the harness's signals, so the audit can check every result.

Every activity execution writes a ``SideEffect`` (kind ``chaos``, key
``<step>@<engine label>``) *before* it returns, so a step whose engine died
after the side effect but before the journal entry shows as two rows: the
audit counts such duplicates and names the engine that ran each.

The atomic step (``chaos_atomic``, ``@activity(atomic=True)``) is the
opposite promise: its ``StockMove`` row (kind ``chaos-atomic``, keyed by the
step in ``workflow_id``) commits with its journal entry, so the audit
allows no duplicate at all (``atomic_double_applied``), whatever the faults.

The capabilities added since (issue #21), each with an outcome the audit can
predict from the input and the harness's actions:

- ``chaos-talk``: updates (``ctx.on_update``; the harness sends each id,
  some twice, and the result lists the ids applied: each must be there once),
  events and a numbered stream (``set_event`` / ``write_stream`` /
  ``close_stream``: every entry present, in order), ``ctx.map`` with
  ``max_concurrency`` (concurrent branches) over ``chaos_limited``, an
  activity of the queue ``chaos-aq`` (concurrency 2 across every engine),
  and a detached child;
- ``chaos-queued``: started into the queue ``chaos-q`` (``QUEUES``: a
  concurrency and a rate limit the audit checks from the journal);
- ``chaos-cancel``: a detached child, then a wait the harness cancels with a
  grace once the ``armed`` event is published: its cleanup is an atomic
  step (``chaos_cleanup``, a ``chaos-cleanup`` ``StockMove``), so "ran
  exactly once" is checkable, and the detached child must still complete;
- ``chaos-ticked``: the workflow of the schedule ``chaos-tick`` the harness
  creates (every second, ``overlap="allow"``): one run per tick.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

from weft_django import activity, workflow
from weft_django.errors import WorkflowCancelled, WorkflowTimeoutError
from weft_django.kernel.clock import wall_ms

#: Which engine ran an activity: set in each engine's environment by the harness.
ENGINE_ENV = "WEFT_CHAOS_ENGINE"
#: Long enough never to fire under chaos; the timers are still written.
PATIENCE_S = 600.0
STEP_KIND = "chaos"
FLAKY_KIND = "chaos-flaky"
TOKEN_KIND = "chaos-token"
ATOMIC_KIND = "chaos-atomic"
CLEANUP_KIND = "chaos-cleanup"

#: The workflows the harness starts, in turn (workflow ``i`` runs ``STARTED[i % 7]``);
#: ``chaos-kids`` is in ``devtools.chaos.flows`` with the other flow-control workloads.
STARTED = (
    "chaos-tour",
    "chaos-chain",
    "chaos-fan",
    "chaos-talk",
    "chaos-queued",
    "chaos-cancel",
    "chaos-kids",
)
#: The declared queue of ``chaos-queued`` and its limits (the audit reads these).
QUEUE = "chaos-q"
QUEUE_CONCURRENCY = 2
QUEUE_RATE = (3, 2_000)  # at most 3 admissions in any 2 s
#: The queue every attempt of ``chaos_limited`` holds a slot of (the talk's ``ctx.map``).
ACTIVITY_QUEUE = "chaos-aq"
ACTIVITY_QUEUE_CONCURRENCY = 2
#: The queue of children (``ctx.start_child(queue=...)``, attached and detached)
#: and of the schedule's runs (``chaos-ticked`` declares it): a concurrency only.
CHILD_QUEUE = "chaos-cq"
CHILD_QUEUE_CONCURRENCY = 2
#: A ``fair`` queue admitting one run at a time (``devtools.chaos.flows``).
FAIR_QUEUE = "chaos-fq"
FAIR_QUEUE_CONCURRENCY = 1
QUEUES = {
    QUEUE: {"concurrency": QUEUE_CONCURRENCY, "rate": f"{QUEUE_RATE[0]}/2s"},
    ACTIVITY_QUEUE: {"concurrency": ACTIVITY_QUEUE_CONCURRENCY},
    CHILD_QUEUE: {"concurrency": CHILD_QUEUE_CONCURRENCY},
    FAIR_QUEUE: {"concurrency": FAIR_QUEUE_CONCURRENCY, "fair": True},
}
#: The schedule the harness creates for the soak's duration, and its period.
SCHEDULE_ID = "chaos-tick"
SCHEDULE_EVERY_MS = 1_000
#: Updates the harness sends each ``chaos-talk`` (ids ``<workflow id>:u<n>``).
UPDATES = 3
#: Numbered entries each ``chaos-talk`` writes to its stream ``nums``.
STREAM_ENTRIES = 3
STREAM = "nums"
#: Attached children of each ``chaos-kids`` (all on ``CHILD_QUEUE``, and one detached).
KIDS = 3
#: Branches of the talk's ``ctx.map`` and how many it runs at once (more than
#: ``ACTIVITY_QUEUE`` allows across every engine: the queue is what binds).
MAP_ITEMS = 4
MAP_CONCURRENCY = 3


def _record(kind: str, key: str) -> None:
    from project.demo.models import SideEffect

    SideEffect.objects.create(kind=kind, key=f"{key}@{os.environ.get(ENGINE_ENV, '?')}")


@activity()
def chaos_step(key: str, seconds: float = 0.0) -> str:
    _record(STEP_KIND, key)
    if seconds:
        time.sleep(seconds)
    return key


@activity(retries=3, backoff=timedelta(milliseconds=100))
def chaos_flaky(key: str) -> str:
    """Fails on its first execution, succeeds afterwards (a durable retry)."""
    from project.demo.models import SideEffect

    before = SideEffect.objects.filter(kind=FLAKY_KIND, key__startswith=f"{key}@").count()
    _record(FLAKY_KIND, key)
    if before == 0:
        raise RuntimeError(f"first attempt of {key} fails")
    return key


@activity(atomic=True, retries=5, backoff=timedelta(milliseconds=100))
def chaos_atomic(key: str, seconds: float = 0.0) -> str:
    """Exactly once: its row and its journal entry commit in one transaction."""
    from project.demo.models import StockMove

    StockMove.objects.create(sku="chaos", workflow_id=key, kind=ATOMIC_KIND, delta=1)
    if seconds:
        time.sleep(seconds)  # the transaction stays open: faults land inside it
    return key


@activity(queue=ACTIVITY_QUEUE)
def chaos_limited(key: str) -> dict[str, Any]:
    """A step through ``ACTIVITY_QUEUE``; returns the wall-clock interval it ran
    in. A journaled attempt ran while holding its slot (the slot is released
    by the commit that journals it, or ends with its claim generation, which
    then journals nothing), so these intervals are the audit's evidence."""
    start = wall_ms()
    time.sleep(0.2)
    return {"key": key, "start": start, "end": wall_ms()}


@activity(atomic=True, retries=5, backoff=timedelta(milliseconds=100))
def chaos_cleanup(key: str) -> str:
    """A cancelled workflow's cleanup: atomic, so the audit can demand exactly once."""
    from project.demo.models import StockMove

    StockMove.objects.create(sku="chaos", workflow_id=key, kind=CLEANUP_KIND, delta=-1)
    return f"{key}:cleanup"


@activity()
def chaos_hand_out(token: str, key: str) -> None:
    """Give the token to the outside world (the harness completes it)."""
    _record(TOKEN_KIND, f"{key}|{token}")


@workflow(name="chaos-leaf")
def chaos_leaf(ctx: Any, data: dict[str, Any]) -> Any:
    return (yield ctx.run(chaos_step, f"{data['key']}:leaf{data.get('n', 0)}"))


@workflow(name="chaos-tour")
def chaos_tour(ctx: Any, data: dict[str, Any]) -> Any:
    """Every kind of park, then ``continue_as_new`` into a one-step second run."""
    key = data["key"]
    if data.get("gen"):
        last = yield ctx.run(chaos_step, f"{key}:next")
        return {"prior": data["prior"], "next": last}
    ctx.state["bumps"] = 0

    def bump(payload: Any) -> None:
        ctx.state["bumps"] += 1

    ctx.on_signal("bump", bump)
    a = yield ctx.run(chaos_step, f"{key}:a", float(data.get("slow", 0.0)))
    stamp, ident, roll = ctx.now(), ctx.uuid4(), ctx.random()
    yield ctx.sleep(float(data.get("sleep", 0.2)))
    go = yield ctx.wait_for_signal("go", timeout=PATIENCE_S)
    try:
        yield ctx.wait_for_signal("never", timeout=0.2)
        timed_out = False
    except WorkflowTimeoutError:
        timed_out = True
    yield ctx.wait_until(lambda: ctx.state["bumps"] >= 2, timeout=PATIENCE_S)
    paid = yield ctx.async_activity(chaos_hand_out, key, timeout=PATIENCE_S)
    b, child = yield ctx.all(
        ctx.run(chaos_step, f"{key}:b", float(data.get("slow", 0.0))),
        ctx.start_child("chaos-leaf", {"key": key}),
    )
    won = yield ctx.race(ctx.sleep(0.05), ctx.wait_for_signal("never-either"))
    flaky = yield ctx.run(chaos_flaky, f"{key}:flaky")
    prior = {
        "a": a,
        "go": go,
        "timed_out": timed_out,
        "bumps": ctx.state["bumps"],
        "paid": paid,
        "b": b,
        "child": child,
        "won": won,
        "flaky": flaky,
        "patched": ctx.patched("chaos-v2"),
        "recorded": [stamp.year > 2000, len(str(ident)), 0 <= roll < 1],
    }
    yield ctx.continue_as_new({"key": key, "gen": 1, "prior": prior})


@workflow(name="chaos-chain")
def chaos_chain(ctx: Any, data: dict[str, Any]) -> Any:
    """Slow steps with sleeps between: long turns to be killed inside."""
    key = data["key"]
    out = []
    for i in range(int(data.get("steps", 3))):
        out.append((yield ctx.run(chaos_step, f"{key}:s{i}", float(data.get("slow", 0.3)))))
        yield ctx.sleep(float(data.get("sleep", 0.2)))
    if data.get("atomic"):
        out.append((yield ctx.run(chaos_atomic, f"{key}:atomic", float(data.get("slow", 0.3)))))
    return out


@workflow(name="chaos-fan")
def chaos_fan(ctx: Any, data: dict[str, Any]) -> Any:
    """Children in parallel, a signal racing a long timer, a retried step."""
    key = data["key"]
    kids = yield ctx.all(*(ctx.start_child("chaos-leaf", {"key": key, "n": n}) for n in range(2)))
    go = yield ctx.race(ctx.wait_for_signal("go"), ctx.sleep(PATIENCE_S))
    flaky = yield ctx.run(chaos_flaky, f"{key}:flaky")
    if data.get("atomic"):
        both = yield ctx.all(
            ctx.run(chaos_atomic, f"{key}:atomic0", 0.1), ctx.run(chaos_atomic, f"{key}:atomic1")
        )
        return {"kids": kids, "go": go, "flaky": flaky, "atomic": both}
    return {"kids": kids, "go": go, "flaky": flaky}


def detached_id(workflow_id: str) -> str:
    """The workflow id of the detached child a talk or a cancel starts."""
    return f"{workflow_id}-det"


def update_ids(workflow_id: str) -> list[str]:
    return [f"{workflow_id}:u{n}" for n in range(UPDATES)]


@workflow(name="chaos-talk")
def chaos_talk(ctx: Any, data: dict[str, Any]) -> Any:
    """Updates, an event, a numbered stream, a bounded ``ctx.map``, a detached child."""
    key = data["key"]
    applied: list[str] = []

    def add(update_id: str) -> int:
        applied.append(update_id)
        return len(applied)

    def check(update_id: Any) -> None:
        if not isinstance(update_id, str):
            raise ValueError(f"an update id is a string, got {update_id!r}")

    ctx.on_update("add", add, validator=check)
    ctx.set_event("phase", "started")
    for n in range(STREAM_ENTRIES):
        ctx.write_stream(STREAM, {"n": n})
        yield ctx.run(chaos_step, f"{key}:p{n}")
    mapped = yield ctx.map(
        chaos_limited, [f"{key}:m{n}" for n in range(MAP_ITEMS)], max_concurrency=MAP_CONCURRENCY
    )
    child = yield ctx.start_child(
        "chaos-leaf",
        {"key": key, "n": "det"},
        workflow_id=detached_id(ctx.workflow_id),
        detached=True,
    )
    ctx.set_event("phase", "waiting")
    yield ctx.wait_until(lambda: len(applied) >= UPDATES, timeout=PATIENCE_S)
    ctx.close_stream(STREAM)
    ctx.set_event("phase", "done")
    return {"applied": list(applied), "mapped": [m["key"] for m in mapped], "detached": child}


@workflow(name="chaos-queued")
def chaos_queued(ctx: Any, data: dict[str, Any]) -> Any:
    """A short run through ``QUEUE`` (started with ``queue=QUEUE``): its journal
    entries, all written while it holds its slot, are the audit's evidence."""
    key = data["key"]
    first = yield ctx.run(chaos_step, f"{key}:q0", 0.3)
    yield ctx.sleep(0.1)
    second = yield ctx.run(chaos_step, f"{key}:q1", 0.1)
    return [first, second]


@workflow(name="chaos-cancel")
def chaos_cancel(ctx: Any, data: dict[str, Any]) -> Any:
    """Cancelled by the harness at its last wait (after ``armed``): cleans up once."""
    key = data["key"]
    yield ctx.run(chaos_step, f"{key}:c")
    yield ctx.start_child(
        "chaos-leaf",
        {"key": key, "n": "det"},
        workflow_id=detached_id(ctx.workflow_id),
        detached=True,
    )
    ctx.set_event("armed", True)
    try:
        yield ctx.wait_for_signal("never", timeout=PATIENCE_S)
    except WorkflowCancelled:
        yield ctx.run(chaos_cleanup, key)
        raise
    return "not cancelled"


@workflow(name="chaos-ticked", queue=CHILD_QUEUE)
def chaos_ticked(ctx: Any, data: Any) -> Any:
    """One run per tick of the schedule ``SCHEDULE_ID`` (and per trigger), each
    through ``CHILD_QUEUE``; its steps are keyed by its id, a sleep between them
    so its journal spans the slot it holds."""
    yield ctx.run(chaos_step, f"{ctx.workflow_id}:tick0", 0.2)
    yield ctx.sleep(0.1)
    return (yield ctx.run(chaos_step, f"{ctx.workflow_id}:tick"))


def expected_result(name: str, key: str) -> Any:
    """What a run of ``name`` for ``key`` returns once the harness played its part
    (the final run's result, for a tour that continued as new)."""
    atomic = uses_atomic(key)
    if name == "chaos-tour":
        prior = {
            "a": f"{key}:a",
            "go": key,
            "timed_out": True,
            "bumps": 2,
            "paid": {"paid": key},
            "b": f"{key}:b",
            "child": f"{key}:leaf0",
            "won": [0, None],  # ctx.race: (index, value) of the sleep
            "flaky": f"{key}:flaky",
            "patched": True,
            "recorded": [True, 36, True],
        }
        return {"prior": prior, "next": f"{key}:next"}
    if name == "chaos-chain":
        return [f"{key}:s{i}" for i in range(3)] + ([f"{key}:atomic"] if atomic else [])
    if name == "chaos-fan":
        fan: dict[str, Any] = {
            "kids": [f"{key}:leaf0", f"{key}:leaf1"],
            "go": [0, key],  # ctx.race: (index, value) of the signal
            "flaky": f"{key}:flaky",
        }
        if atomic:
            fan["atomic"] = [f"{key}:atomic0", f"{key}:atomic1"]
        return fan
    if name == "chaos-leaf":  # a detached child, audited as a workflow of its own
        return f"{key}:leafdet"
    if name == "chaos-queued":
        return [f"{key}:q0", f"{key}:q1"]
    if name == "chaos-kids":
        return {"kids": [f"{key}:k{n}" for n in range(KIDS)], "detached": True}
    if name == "chaos-kid":  # the detached one, audited as a workflow of its own
        return f"{key}:kdet"
    raise ValueError(name)


def expected_talk(workflow_id: str, key: str) -> dict[str, Any]:
    """A talk's result, its ``applied`` ids sorted (they land in any order)."""
    return {
        "applied": sorted(update_ids(workflow_id)),
        "mapped": [f"{key}:m{n}" for n in range(MAP_ITEMS)],
        "detached": detached_id(workflow_id),
    }


def uses_atomic(key: str) -> bool:
    """Whether the chain or fan of ``key`` (``w0001``) runs its atomic steps: half
    of them, those whose number is odd (the harness says so in their input)."""
    return bool(key) and key[-1] in "13579"
