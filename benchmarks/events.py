"""Event latency: the engine's ``ctx.set_event`` → ``client.get_event`` returned.

One ``weft_worker`` (NOTIFY, the default) drives ``bench-event-echo``: per
sample this process sends ``go`` (``client.signal``), the engine's turn sets
event ``e<i>`` and commits it (the row's ``set_at``, engine clock = wall
clock, taken just before the fenced batch), and a reader here returns with
the value. Two readers, alternating sample by sample so both see the same
load: ours, ``client.get_event`` (subscribed to ``weft_done`` before it
reads, woken by the NOTIFY the publishing batch sends on commit), and the
baseline, a polling loop that reads the event row every 10 ms (what a view
without ``get_event`` would do). Each reader is already waiting when the
signal is sent. Reported: set → returned (p50/p99) and signal → returned,
and row visible → returned (a 1 ms probe thread marks when the committed
row could first be read: it separates the reader's delay from the
commit's, which dominates on a loaded machine), for both; the headline is
ours / polling at p50 of set → returned. On a loaded machine the probe is
itself late now and then (a negative visible → returned is the probe losing
the CPU, not a reader seeing the future): read it as a diagnostic. Issue #18's bar: the wait
returns within 100 ms of the set (p99), measured here, not asserted in a test.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from benchmarks import children, common, stats
from devtools.procs import wait_for

POLL_S = 0.010
#: The visibility probe's period: when the committed row could first be read.
PROBE_S = 0.001
TARGET_P99_MS = 100.0


def _poll(workflow_id: str, key: str, timeout: float, period: float = POLL_S) -> Any:
    from weft_django.models import WorkflowEvent

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = (
            WorkflowEvent.objects.filter(run__workflow_id=workflow_id, key=key)
            .values_list("value", flat=True)
            .first()
        )
        if row is not None:
            return row
        time.sleep(period)
    raise TimeoutError(key)


def run(quick: bool, publish: bool = True) -> dict[str, Any]:
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    common.reset_tables()
    from django.db import connections

    from weft_django import client
    from weft_django.models import WorkflowEvent, WorkflowRun

    samples = 40 if quick else 300
    worker = children.weft_worker("events-w1")
    names = ("set_to_return", "visible_to_return", "signal_to_return")
    ours: dict[str, list[float]] = {name: [] for name in names}
    polled: dict[str, list[float]] = {name: [] for name in names}
    try:
        wid = "bench-events"
        client.start("bench-event-echo", {"samples": samples}, workflow_id=wid)
        wait_for(
            "the run to park",
            lambda: WorkflowRun.objects.filter(workflow_id=wid, status="parked").exists(),
            worker,
            timeout=120,
        )
        for i in range(samples):
            key = f"e{i}"
            use_ours = i % 2 == 0
            returned: dict[str, float] = {}

            def reader(
                key: str = key, use_ours: bool = use_ours, returned: dict[str, float] = returned
            ) -> None:
                try:
                    if use_ours:
                        client.get_event(wid, key, timeout=60)
                    else:
                        _poll(wid, key, 60)
                    returned["ms"] = time.time() * 1000
                finally:
                    connections.close_all()

            def probe(key: str = key, returned: dict[str, float] = returned) -> None:
                try:
                    _poll(wid, key, 60, PROBE_S)
                    returned["visible"] = time.time() * 1000
                finally:
                    connections.close_all()

            threads = [threading.Thread(target=reader), threading.Thread(target=probe)]
            for thread in threads:
                thread.start()
            time.sleep(0.05)  # the reader is subscribed / polling before the set
            sent_ms = time.time() * 1000
            client.signal(wid, "go", {"i": i})
            for thread in threads:
                thread.join(timeout=120)
            set_at = WorkflowEvent.objects.get(run__workflow_id=wid, key=key).set_at
            into = ours if use_ours else polled
            into["set_to_return"].append(returned["ms"] - set_at)
            into["visible_to_return"].append(returned["ms"] - returned["visible"])
            into["signal_to_return"].append(returned["ms"] - sent_ms)
            time.sleep(0.02)  # the engine parks again before the next signal
    finally:
        children.stop_all([worker])
    figures = {name: stats.distribution(values) for name, values in ours.items()}
    baseline = {name: stats.distribution(values) for name, values in polled.items()}
    ours_p50 = stats.percentile(ours["set_to_return"], 50) or 0.0
    base_p50 = stats.percentile(polled["set_to_return"], 50) or 1.0
    ours_p99 = stats.percentile(ours["set_to_return"], 99) or 0.0
    ratio = {
        "headline": "get_event p50 / 10 ms polling p50 (set -> returned)",
        "value": stats.rnd(ours_p50 / base_p50),
        "target": f"p99 set -> returned <= {TARGET_P99_MS:g} ms",
        "p99_ms": stats.rnd(ours_p99, 1),
        "met": ours_p99 <= TARGET_P99_MS,
    }
    return common.document(
        "events",
        mode="quick" if quick else "full",
        figures={"get_event (NOTIFY)": figures, "samples_each": len(ours["set_to_return"])},
        baseline={"poll every 10 ms": baseline},
        ratio=ratio,
        settings={"poll_s": POLL_S, "samples": samples, "engine": "weft_worker (NOTIFY)"},
        machine=machine,
        notes=[
            "set_at is the engine clock (wall ms) just before the publishing batch; "
            "returned is this process's wall clock: one machine, one clock.",
            "signal_to_return includes the signal's wake and the engine's turn.",
            "visible_to_return: from when a 1 ms probe (a third thread) first read the "
            "committed row; it isolates the reader's own delay from the commit's.",
        ],
        url=url,
    )


def main(argv: list[str] | None = None) -> int:
    return common.simple_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
