"""The non-durable peer of ``benchmarks/peers.py``: a Celery chain of three trivial tasks.

``chain(reserve.s(id), charge.s(), ship.s())`` is the same shape as the
demo's "three-steps" workflow (and DBOS's ``three_steps`` in
``benchmarks/dbos_peer.py``): three steps, each writing one side-effect row
(``bench_chain_side_effect``, an autocommit psycopg connection per pool
process, like DBOS's steps) and passing its result on. It is NOT durable:
nothing records progress, a lost worker loses the chain. Its own Celery app
(no Django, no weft): broker and result backend are the benchmark's Redis
database (``children.broker_url()``, ``WEFT_BENCH_BROKER``); the side-effect
table lives in the benchmark database (``WEFT_BENCH_URL``).

Run by ``celery -A benchmarks.celery_chain worker`` (``command()``); the
benchmark process imports it as the producer (``start(order_id)`` sends one
chain and returns its ``AsyncResult``).
"""

from __future__ import annotations

import sys
from typing import Any

from celery import Celery, chain, signals

from benchmarks.children import broker_url
from benchmarks.common import bench_url, pg_connect

TABLE = "bench_chain_side_effect"

app = Celery("weft-bench-chain", broker=broker_url(), backend=broker_url())
app.conf.update(
    broker_connection_retry_on_startup=True,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    result_expires=3600,
    worker_hijack_root_logger=False,
)

_conn: Any = None


def _side_effect(kind: str, key: str) -> None:
    global _conn
    if _conn is None:
        _conn = pg_connect(bench_url())
    _conn.execute(f"INSERT INTO {TABLE} (kind, key) VALUES (%s, %s)", [kind, key])


@app.task(name="chain.reserve")
def reserve(order_id: str) -> dict[str, Any]:
    _side_effect("reserve", order_id)
    return {"id": order_id, "done": [f"reserved:{order_id}"]}


@app.task(name="chain.charge")
def charge(state: dict[str, Any]) -> dict[str, Any]:
    _side_effect("charge", state["id"])
    return {**state, "done": [*state["done"], {"order": state["id"], "charged": 1}]}


@app.task(name="chain.ship")
def ship(state: dict[str, Any]) -> list[Any]:
    _side_effect("ship", state["id"])
    return [*state["done"], f"shipped:{state['id']}"]


def start(order_id: str) -> Any:
    """Send one chain; its ``AsyncResult`` is the last task's (``.get()`` waits for all)."""
    return chain(reserve.s(order_id), charge.s(), ship.s()).apply_async()


def prepare_table() -> None:
    """Create (or empty) the side-effect table in the benchmark database."""
    with pg_connect(bench_url()) as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigserial PRIMARY KEY, kind text NOT NULL, "
            "key text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())"
        )
        conn.execute(f"TRUNCATE {TABLE}")


def command(node: str, concurrency: int) -> list[str]:
    """``celery -A benchmarks.celery_chain worker`` (prefork, log level WARNING)."""
    argv = [sys.executable, "-m", "celery", "-A", "benchmarks.celery_chain", "worker"]
    argv += ["-n", node, "-P", "prefork", "-c", str(concurrency), "-l", "WARNING"]
    return [*argv, "--without-mingle", "--without-gossip", "--without-heartbeat"]


READY_MARK = "weft-bench-chain-ready"


@signals.worker_ready.connect(weak=False, dispatch_uid="weft_bench_chain.ready")
def _announce_ready(**_: Any) -> None:
    print(READY_MARK, file=sys.stdout, flush=True)


@signals.worker_process_init.connect(weak=False, dispatch_uid="weft_bench_chain.fork")
def _fresh_connection(**_: Any) -> None:
    """A forked pool process opens its own connection (never the parent's socket)."""
    global _conn
    _conn = None


__all__ = ["READY_MARK", "app", "command", "prepare_table", "start"]
