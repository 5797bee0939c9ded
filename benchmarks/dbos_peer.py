"""The DBOS peer of the workflow-throughput benchmark (run in ``benchmarks/.venv-dbos``).

NOT imported by the project: it runs under the benchmark's own virtual
environment, where ``dbos`` is installed (``benchmarks/.venv-dbos/bin/pip
install dbos``); DBOS is no dependency of weft-django. Two modes:

``worker``  one DBOS executor process: registers the same three-step workflow
            as ``project/demo/workflows.py`` ("three-steps": three trivial
            steps, each writing one side-effect row, like the demo's
            ``SideEffect``), launches DBOS on the given system database,
            registers (or finds) the queue ``bench`` and dequeues from it until
            SIGTERM. It prints ``ready <executor>`` once launched, and at exit
            one JSON line with its exact write-commit counter (see below).
``enqueue`` a ``DBOSClient`` that enqueues ``--runs`` workflows as fast as it
            can (the analog of ``client.start`` from a web process), then
            exits; the caller waits for completion in the database.
``sequential`` a ``DBOSClient`` that enqueues ONE workflow, waits for it with
            its handle's ``get_result(polling_interval_sec=--result-poll)``,
            and repeats ``--runs`` times (the analog of ``client.start`` then
            ``handle.result()``); prints one JSON line with every latency.
            ``worker --sequential N`` is the in-process variant: the executor
            itself calls ``DBOS.start_workflow`` then ``get_result`` N times
            (no queue, no second process) and exits.

Write commits are counted like ``benchmarks/commits_per_workflow.py`` does
for weft: SQLAlchemy events on DBOS's own system-database engine see every
statement (``before_cursor_execute``) and every ``commit``/``rollback`` of a
connection; a committed transaction that ran an INSERT/UPDATE/DELETE is one
write commit. The steps' own side-effect rows go through a separate psycopg
connection (user code, as the demo activities) and are not counted here.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import sys
import threading
import time
from typing import Any

QUEUE = "bench"
WRITE_VERBS = ("INSERT", "UPDATE", "DELETE")


def _verb(sql: str) -> str:
    text = sql.lstrip()
    if text.upper().startswith("WITH"):
        # A CTE: the data-modifying verb, if any, follows the WITH clause.
        upper = text.upper()
        return next((v for v in WRITE_VERBS if f"{v} " in upper), "SELECT")
    return text.split(None, 1)[0].upper() if text else ""


class CommitCounter:
    """Write commits of one SQLAlchemy engine (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.write_commits = 0
        self.all_commits = 0
        self.rollbacks = 0
        self.autocommit_writes = 0

    def attach(self, engine: Any) -> None:
        from sqlalchemy import event

        @event.listens_for(engine, "before_cursor_execute")
        def before(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
            if _verb(statement) in WRITE_VERBS:
                level = conn.get_execution_options().get("isolation_level")
                if level == "AUTOCOMMIT":
                    with self.lock:
                        self.autocommit_writes += 1
                        self.write_commits += 1
                else:
                    conn.info["weft_bench_writes"] = True

        @event.listens_for(engine, "commit")
        def commit(conn):  # type: ignore[no-untyped-def]
            with self.lock:
                self.all_commits += 1
                if conn.info.pop("weft_bench_writes", False):
                    self.write_commits += 1

        @event.listens_for(engine, "rollback")
        def rollback(conn):  # type: ignore[no-untyped-def]
            with self.lock:
                self.rollbacks += 1
            conn.info.pop("weft_bench_writes", None)


def worker(args: argparse.Namespace) -> int:
    import psycopg
    from dbos import DBOS, DBOSConfig

    # The steps' own writes (user code): a small pool of autocommit connections, as
    # many as the workflows this executor runs at once (at most WORKER_CONCURRENCY).
    pool: queue.Queue[Any] = queue.Queue()
    for _ in range(max(1, args.side_connections)):
        pool.put(psycopg.connect(args.url, autocommit=True))

    def side_effect(kind: str, key: str) -> None:
        conn = pool.get()
        try:
            conn.execute("INSERT INTO bench_side_effect (kind, key) VALUES (%s, %s)", [kind, key])
        finally:
            pool.put(conn)

    @DBOS.step()
    def reserve_stock(order_id: str) -> str:
        side_effect("reserve", order_id)
        return f"reserved:{order_id}"

    @DBOS.step()
    def charge_card(order_id: str, amount: int) -> dict[str, Any]:
        side_effect("charge", order_id)
        return {"order": order_id, "charged": amount}

    @DBOS.step()
    def ship(order_id: str) -> str:
        side_effect("ship", order_id)
        return f"shipped:{order_id}"

    @DBOS.workflow(name="three_steps")
    def three_steps(data: dict[str, Any]) -> Any:
        a = reserve_stock(data["id"])
        b = charge_card(data["id"], 1)
        c = ship(data["id"])
        return [a, b, c]

    config: DBOSConfig = {
        "name": "weft-bench",
        "system_database_url": args.url,
        "application_version": "bench",
        "executor_id": args.executor,
        "log_level": "WARNING",
        "sys_db_pool_size": args.pool_size,
    }
    DBOS(config=config)
    DBOS.launch()
    if args.sequential:
        return _in_process(args, three_steps)
    counter = CommitCounter()
    DBOS.register_queue(
        QUEUE,
        worker_concurrency=args.worker_concurrency or None,
        polling_interval_sec=args.poll,
        on_conflict="always_update",
    )
    counter.attach(_engine())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"ready {args.executor}", flush=True)
    while not stop.wait(0.2):
        pass
    print(
        json.dumps(
            {
                "executor": args.executor,
                "write_commits": counter.write_commits,
                "all_commits": counter.all_commits,
                "rollbacks": counter.rollbacks,
                "autocommit_writes": counter.autocommit_writes,
            }
        ),
        flush=True,
    )
    os._exit(0)  # DBOS.destroy() may wait on its background threads; we are done


def _in_process(args: argparse.Namespace, three_steps: Any) -> int:
    """``worker --sequential N``: start → result N times inside the executor."""
    from dbos import DBOS

    latencies: list[float] = []
    started = time.perf_counter()
    for i in range(args.sequential):
        t0 = time.perf_counter()
        handle = DBOS.start_workflow(three_steps, {"id": f"{args.executor}-{i}"})
        handle.get_result(polling_interval_sec=args.result_poll)
        latencies.append((time.perf_counter() - t0) * 1000)
    elapsed = time.perf_counter() - started
    print(json.dumps({"runs": args.sequential, "elapsed_s": elapsed, "latency_ms": latencies}))
    sys.stdout.flush()
    os._exit(0)


def sequential(args: argparse.Namespace) -> int:
    """Enqueue one, wait for its result, repeat (see the module docstring)."""
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=args.url, application_name="weft-bench")
    options = {"queue_name": QUEUE, "workflow_name": "three_steps", "app_version": "bench"}
    print("sequential", flush=True)
    latencies: list[float] = []
    started = time.perf_counter()
    for i in range(args.runs):
        t0 = time.perf_counter()
        handle = client.enqueue(options, {"id": f"{args.prefix}-{i}"})  # type: ignore[arg-type]
        handle.get_result(polling_interval_sec=args.result_poll)
        latencies.append((time.perf_counter() - t0) * 1000)
    elapsed = time.perf_counter() - started
    client.destroy()
    print(json.dumps({"runs": args.runs, "elapsed_s": elapsed, "latency_ms": latencies}))
    return 0


def _engine() -> Any:
    from dbos._dbos import _get_dbos_instance

    return _get_dbos_instance()._sys_db.engine


def enqueue(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from dbos import DBOSClient

    client = DBOSClient(system_database_url=args.url, application_name="weft-bench")

    def one(i: int) -> None:
        client.enqueue(
            {"queue_name": QUEUE, "workflow_name": "three_steps", "app_version": "bench"},
            {"id": f"{args.prefix}-{i}"},
        )

    print("enqueuing", flush=True)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, args.threads)) as pool:
        list(pool.map(one, range(args.runs)))
    elapsed = time.perf_counter() - started
    client.destroy()
    print(json.dumps({"enqueued": args.runs, "enqueue_s": round(elapsed, 3)}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    w = sub.add_parser("worker")
    w.add_argument("--url", required=True)
    w.add_argument("--executor", required=True)
    w.add_argument("--poll", type=float, default=0.2)
    w.add_argument("--worker-concurrency", type=int, default=0, help="0: unbounded")
    w.add_argument("--pool-size", type=int, default=10, help="sys_db_pool_size")
    w.add_argument("--side-connections", type=int, default=4)
    w.add_argument("--sequential", type=int, default=0, help="in-process start → result N times")
    w.add_argument("--result-poll", type=float, default=0.01, help="get_result polling, s")
    e = sub.add_parser("enqueue")
    e.add_argument("--url", required=True)
    e.add_argument("--runs", type=int, required=True)
    e.add_argument("--prefix", default="dbos")
    e.add_argument("--threads", type=int, default=1)
    q = sub.add_parser("sequential")
    q.add_argument("--url", required=True)
    q.add_argument("--runs", type=int, required=True)
    q.add_argument("--prefix", default="dbos-seq")
    q.add_argument("--result-poll", type=float, default=0.01, help="get_result polling, s")
    args = parser.parse_args(argv)
    modes = {"worker": worker, "enqueue": enqueue, "sequential": sequential}
    return modes[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
