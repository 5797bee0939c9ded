"""``python -m devtools.chaos``: a long chaos soak on its own services.

By default the soak starts its own PostgreSQL cluster and its own Redis
server (``devtools.chaos.services``; ``--broker amqp``: its own RabbitMQ node),
so that it may restart them (``pg_restart``, ``broker_outage``) without
harming anything else; ``--pg user@host:port`` or a broker URL use an
existing server instead, and those two fault kinds are then left out.
Creates the database (default ``weft_chaos``; dropped first on an external
server), migrates it, runs ``devtools.chaos.harness.run_chaos`` and prints ONE
summary line on stdout (progress and any violation's details go to stderr). Exits 1 when
the audit found a broken promise (a lost or wrongly finished workflow, a
journal position written twice, a write by a non-holder, an early takeover,
an unexplained duplicate execution, a stuck claim).

Example (``scripts/chaos`` passes its arguments here)::

    python -m devtools.chaos --engines 3 --celery 1 --workflows 300 --faults 20 --seed 7
    python -m devtools.chaos --broker amqp --json /tmp/chaos.json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

from devtools.chaos.services import PrivatePostgres, PrivateRabbit, PrivateRedis


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.chaos", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--engines", type=int, default=3, help="engine processes in all")
    parser.add_argument("--celery", type=int, default=1, help="how many of them are Celery nodes")
    parser.add_argument("--workflows", type=int, default=300)
    parser.add_argument("--faults", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--poison",
        type=int,
        default=1,
        help="poison runs of each kind (an activity and a body that exit their engine)",
    )
    parser.add_argument("--database", default="weft_chaos", help="dropped and recreated")
    parser.add_argument(
        "--pg",
        default="private",
        help="'private' (default: the soak's own cluster on a free port) or user@host:port",
    )
    parser.add_argument(
        "--broker",
        default="redis",
        help="'redis' (default) or 'amqp': the soak's own server; or a broker URL (flushed)",
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="also write the audit and the faults here"
    )
    parser.add_argument("--logs", type=Path, default=Path("/tmp/weft-chaos"))
    parser.add_argument("--start-window", type=float, default=None, help="seconds to start all")
    parser.add_argument(
        "--pg-options",
        default="",
        help="libpq options of the engines' sessions, e.g. "
        "'-c idle_in_transaction_session_timeout=1000'",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="hang protection, seconds")
    parser.add_argument(
        "--dump",
        type=Path,
        default=None,
        help="also pg_dump the soak's database here (custom format) before the services close",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.celery <= args.engines or args.engines < 2:
        parser.error("need at least 2 engines, and --celery between 0 and --engines")
    return args


def _jsonable(value: Any) -> Any:
    """The audit as JSON: mappings keyed by strings (some figures key by tuples)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return value


def recreate_database(pg: str, name: str) -> None:
    import psycopg

    user, _, hostport = pg.partition("@")
    host, _, port = hostport.partition(":")
    with psycopg.connect(
        host=host, port=int(port or 5432), user=user, dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def dump_database(pg: str, name: str, path: Path) -> None:
    """The soak's database as ``pg_dump -Fc`` (for reading a violation's rows
    after the private cluster is gone: ``pg_restore -d <db> <path>``)."""
    import subprocess

    from devtools.chaos.services import _pg_binary

    user, _, hostport = pg.partition("@")
    host, _, port = hostport.partition(":")
    subprocess.run(
        [
            _pg_binary("pg_dump"),
            "-Fc",
            "-h",
            host,
            "-p",
            port or "5432",
            "-U",
            user,
            "-f",
            str(path),
            name,
        ],
        check=True,
    )


def main(argv: list[str]) -> int:
    args = parse(argv)
    args.logs.mkdir(parents=True, exist_ok=True)
    for stale in args.logs.glob("*.log"):  # one run's engine logs only
        stale.unlink()
    with contextlib.ExitStack() as services:
        database = broker = None
        pg = args.pg
        if args.pg == "private":
            database = PrivatePostgres(log_dir=args.logs)
            services.callback(database.close)
            database.setup()
            pg = f"{database.user}@127.0.0.1:{database.port}"
        broker_url = args.broker
        if args.broker in ("redis", "amqp"):
            broker = PrivateRedis(log_dir=args.logs) if args.broker == "redis" else None
            broker = broker or PrivateRabbit(log_dir=args.logs)
            services.callback(broker.close)
            if isinstance(broker, PrivateRedis):
                broker.start()
                broker_url = broker.url(0)
            else:
                broker.setup()
                broker_url = broker.url()
        print(f"services: postgres {pg}, broker {broker_url}", file=sys.stderr, flush=True)
        return run(args, pg, broker_url, database, broker)


def run(
    args: argparse.Namespace,
    pg: str,
    broker_url: str,
    database: PrivatePostgres | None,
    broker: PrivateRedis | PrivateRabbit | None,
) -> int:
    os.environ["DATABASE_URL"] = f"postgres://{pg}/{args.database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    recreate_database(pg, args.database)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from devtools.chaos.harness import ChaosConfig, run_chaos

    config = ChaosConfig(
        engines=args.engines,
        celery=args.celery,
        workflows=args.workflows,
        faults=args.faults,
        seed=args.seed,
        poison=args.poison,
        logs=args.logs,
        broker=broker_url,
        start_window_s=args.start_window,
        drain_timeout_s=args.timeout,
        pg_options=args.pg_options,
        database_service=database,
        broker_service=broker,
    )
    result = run_chaos(config, progress=lambda line: print(line, file=sys.stderr, flush=True))
    if args.dump is not None:
        dump_database(pg, args.database, args.dump)
    for record in result.faults:
        print(
            f"fault {record.kind:<10} {record.target:<10} {record.engine_id:<40} "
            f"at {record.start_ms} +{record.end_ms - record.start_ms:>5} ms  {record.detail}",
            file=sys.stderr,
        )
    details = result.audit.details()
    if details:
        print(details, file=sys.stderr)
    print(result.summary, flush=True)
    if args.json is not None:
        report = {
            "summary": result.summary,
            "violations": result.audit.violations,
            # Shallow: ``asdict`` would rebuild the Counter of fault kinds from pairs.
            "audit": {
                f.name: getattr(result.audit, f.name) for f in dataclasses.fields(result.audit)
            },
            "faults": [dataclasses.asdict(record) for record in result.faults],
        }
        args.json.write_text(json.dumps(_jsonable(report), indent=1, default=str))
    return 1 if result.audit.violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
