"""A claim racer: one OS process that races others for the same claim.

Run as ``python -m tests.procs.claim_racer ENGINE_ID OPERATION WORKFLOW_ID``
(``OPERATION`` is ``acquire`` or ``takeover``) with cwd at the repository
root and the test database's ``DATABASE_URL`` in the environment
(``tests.support.child_env``).

Protocol with the parent test: set up Django, build a ``ClaimRegistry`` for
``ENGINE_ID``, warm the database connection with one query, print ``READY``;
block on one line of stdin (the start barrier: the parent writes ``GO`` to
every racer only after all of them are ready); perform the operation once;
print one JSON line and exit 0.

The registry's ``read`` is wrapped on this instance (product code is not
changed) to record each read's result and the wall-clock time it returned,
so the parent can prove the race was real: losers that read the claim as
never-claimed before the winner's commit finished lost at the CAS itself.
Times are ``time.time_ns()`` — comparable across processes, unlike
``time.monotonic_ns()``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def main(argv: list[str]) -> int:
    engine_id, operation, workflow_id = argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()

    from django.db import connection

    from weft_django.conf import get_settings
    from weft_django.ownership.registry import ClaimRegistry
    from weft_django.ownership.transitions import ClaimSnapshot

    settings = get_settings()
    registry = ClaimRegistry(
        engine_id=engine_id,
        clock=wall_ms,
        claim_ttl_ms=settings.claim_ttl_ms,
        claim_renew_interval_ms=settings.claim_renew_interval_ms,
        using=settings.database,
    )
    # Warm the connection *and* the ORM path of the read with one query (of
    # an id nobody uses), so the racers' first read after the barrier is not
    # spread out by per-process cold-start work.
    registry.read(f"warm-up/{engine_id}")
    journal_mode = None
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            journal_mode = cursor.fetchone()[0]

    reads: list[dict[str, Any]] = []
    product_read = registry.read

    def recording_read(wid: str) -> ClaimSnapshot:
        began = time.time_ns()
        snapshot = product_read(wid)
        reads.append(
            {
                "began_ns": began,
                "t": time.time_ns(),
                "epoch": snapshot.epoch,
                "engine_id": snapshot.engine_id,
                "holder_absent": snapshot.holder_absent,
            }
        )
        return snapshot

    registry.read = recording_read  # type: ignore[method-assign]

    print("READY", flush=True)
    go = sys.stdin.readline().split()
    if not go or go[0] != "GO":
        return 3
    if len(go) > 1:  # "GO <time_ns>": start together at that wall-clock instant
        time.sleep(max(0, int(go[1]) - time.time_ns()) / 1e9)
    start = time.time_ns()
    if operation == "acquire":
        result: Any = registry.acquire(workflow_id)
    elif operation == "takeover":
        result = registry.takeover(workflow_id)
    else:
        raise SystemExit(f"unknown operation {operation!r}")
    finish = time.time_ns()
    first = reads[0] if reads else None
    print(
        json.dumps(
            {
                "engine_id": engine_id,
                "pid": os.getpid(),
                "vendor": connection.vendor,
                "journal_mode": journal_mode,
                "status": result.status,
                "epoch": result.epoch,
                "held_by": result.held_by,
                "start_ns": start,
                "reads": reads,
                "read_began_ns": first["began_ns"] if first else None,
                "read_ns": first["t"] if first else None,
                "read_epoch": first["epoch"] if first else None,
                "read_holder_absent": first["holder_absent"] if first else None,
                "read_engine_id": first["engine_id"] if first else None,
                "finish_ns": finish,
            }
        ),
        flush=True,
    )
    connection.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
