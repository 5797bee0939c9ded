"""A claim racer: one OS process that races others for the same claim.

Run as::

    python -m tests.procs.claim_racer ENGINE_ID {acquire,takeover} WORKFLOW_ID \
        [--hold-after-read-ms MS]

with cwd at the repository root and the test database's ``DATABASE_URL`` in
the environment (``tests.support.child_env``).

Protocol with the parent test: set up Django, build a ``ClaimRegistry`` for
``ENGINE_ID`` (wall-clock engine clock, settings' claim timings), warm the
database connection with one query, print ``READY``; block on one line of
stdin (the start barrier: the parent writes ``GO`` to every racer only after
all of them are ready); perform the operation once; print one JSON line and
exit 0.

Instrumentation, without changing product code: the registry's ``read`` is
wrapped on this instance to record each read's result and the wall-clock
times it began and returned (``time.time_ns()``, comparable across
processes, unlike ``time.monotonic_ns()``), so the parent can show the race
was real. ``--hold-after-read-ms`` makes the first read's caller wait that
long before going on to its compare-and-set — the stand-in for the latency
a real engine has between its read and its batch (a network round trip, a
GC pause). Without it, a CPU-bound SQLite acquire on two busy cores often
finishes inside one scheduler slice, before most racers have even woken.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from weft_django.kernel.clock import wall_ms


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="claim_racer")
    parser.add_argument("engine_id")
    parser.add_argument("operation", choices=["acquire", "takeover"])
    parser.add_argument("workflow_id")
    parser.add_argument("--hold-after-read-ms", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()

    from django.db import connection

    from weft_django.conf import get_settings
    from weft_django.ownership.registry import ClaimRegistry
    from weft_django.ownership.transitions import ClaimSnapshot

    settings = get_settings()
    registry = ClaimRegistry(
        engine_id=args.engine_id,
        clock=wall_ms,
        claim_ttl_ms=settings.claim_ttl_ms,
        claim_renew_interval_ms=settings.claim_renew_interval_ms,
        using=settings.database,
    )
    # Warm the connection *and* the ORM path of the read with one query (of
    # an id nobody uses), so the racers' reads after the barrier are not
    # spread out by per-process cold-start work.
    registry.read(f"warm-up/{args.engine_id}")
    journal_mode = None
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            journal_mode = cursor.fetchone()[0]

    reads: list[dict[str, Any]] = []
    product_read = registry.read

    def recording_read(workflow_id: str) -> ClaimSnapshot:
        began = time.time_ns()
        snapshot = product_read(workflow_id)
        reads.append(
            {
                "began_ns": began,
                "returned_ns": time.time_ns(),
                "epoch": snapshot.epoch,
                "engine_id": snapshot.engine_id,
                "holder_absent": snapshot.holder_absent,
            }
        )
        if len(reads) == 1 and args.hold_after_read_ms > 0:
            time.sleep(args.hold_after_read_ms / 1000)
        return snapshot

    registry.read = recording_read  # type: ignore[method-assign]

    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        return 3
    started = time.time_ns()
    if args.operation == "acquire":
        result: Any = registry.acquire(args.workflow_id)
    else:
        result = registry.takeover(args.workflow_id)
    finished = time.time_ns()  # after the batch committed (or was refused)
    first = reads[0] if reads else {}
    print(
        json.dumps(
            {
                "engine_id": args.engine_id,
                "pid": os.getpid(),
                "vendor": connection.vendor,
                "journal_mode": journal_mode,
                "status": result.status,
                "epoch": result.epoch,
                "held_by": result.held_by,
                "start_ns": started,
                "reads": reads,
                "read_began_ns": first.get("began_ns"),
                "read_ns": first.get("returned_ns"),
                "read_epoch": first.get("epoch"),
                "read_holder_absent": first.get("holder_absent"),
                "read_engine_id": first.get("engine_id"),
                "finish_ns": finished,
            }
        ),
        flush=True,
    )
    connection.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
