"""Shared set-up of the benchmarks: the database, Django, machine facts, output.

Every benchmark creates (if missing) and migrates its own PostgreSQL database
``weft_bench`` with ``manage.py migrate`` (``DATABASE_URL=
postgres://postgres@127.0.0.1:5432/weft_bench``; ``WEFT_BENCH_URL`` overrides
it), empties the weft and demo tables, and prints ONE JSON document built by
``document()``: its figures, the baseline measured in the same run, the
ratio and its target, versions, settings and the machine (``nproc``, the
load average at start and at end). Pictures and the JSON go to
``benchmarks/out/`` (gitignored); ``publish_png`` also copies a picture to
``docs/img/bench-<name>.png`` for the README.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from devtools import procs
from devtools.procs import REPO_ROOT

#: ``WEFT_BENCH_OUT`` moves the JSON, logs and pictures (the smoke test: its tiny
#: run must not overwrite the figures of a real one).
OUT_DIR = Path(os.environ.get("WEFT_BENCH_OUT") or REPO_ROOT / "benchmarks" / "out")
LOG_DIR = OUT_DIR / "logs"
DOCS_IMG = REPO_ROOT / "docs" / "img"
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/weft_bench"
DBOS_VENV = REPO_ROOT / "benchmarks" / ".venv-dbos"
TWO_CORE_NOTE = (
    "This machine has {nproc} cores shared with other work: with more processes than "
    "cores, the figures measure contention (processes and PostgreSQL backends competing "
    "for the same CPUs) as much as scaling."
)


def bench_url() -> str:
    return os.environ.get("WEFT_BENCH_URL", DEFAULT_URL)


def pg_params(url: str | None = None, dbname: str | None = None) -> dict[str, Any]:
    """psycopg keyword arguments for ``url`` (optionally another database)."""
    parts = urlsplit(url or bench_url())
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 5432,
        "user": parts.username or "postgres",
        "password": parts.password or None,
        "dbname": dbname or parts.path.lstrip("/") or "weft_bench",
    }


def with_database(url: str, dbname: str) -> str:
    parts = urlsplit(url)
    return parts._replace(path=f"/{quote(dbname)}", query="").geturl()


def pg_connect(url: str | None = None, dbname: str | None = None, autocommit: bool = True) -> Any:
    import psycopg

    return psycopg.connect(autocommit=autocommit, **pg_params(url, dbname))


def create_database(name: str, url: str | None = None, drop: bool = False) -> None:
    """Create database ``name`` on the server of ``url`` (dropping it first if asked)."""
    with pg_connect(url, "postgres") as admin:
        if drop:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{name}"')


def child_env(url: str | None = None, **extra: str) -> dict[str, str]:
    """``devtools.procs.child_env`` on ``weft_bench``, production-like (no query log)."""
    base = {"DJANGO_SETTINGS_MODULE": "project.settings", "DJANGO_DEBUG": "0"}
    return procs.child_env(url or bench_url(), **{**base, **extra})


def ensure_database(url: str | None = None) -> None:
    """Create ``weft_bench`` if missing, then ``manage.py migrate`` it."""
    url = url or bench_url()
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit(f"the benchmarks need PostgreSQL; got {url!r}")
    create_database(pg_params(url)["dbname"], url)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=REPO_ROOT,
        env=child_env(url),
        check=True,
    )


def setup_django(url: str | None = None) -> None:
    """Point this process at ``weft_bench`` and set Django up (idempotent)."""
    os.environ["DATABASE_URL"] = url or bench_url()
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    os.environ["DJANGO_DEBUG"] = "0"
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    import django

    django.setup()
    import benchmarks.workflows  # noqa: F401  (bench-sleeper: client.start needs it here)


def reset_tables() -> None:
    """Empty every table of the weft and demo apps (needs Django set up)."""
    from django.apps import apps
    from django.db import connection

    tables = [
        model._meta.db_table
        for label in ("weft", "demo")
        for model in apps.get_app_config(label).get_models()
    ]
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")


# -- facts ------------------------------------------------------------------------------


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _git() -> dict[str, Any]:
    def run(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True)
        return out.stdout.strip()

    return {"commit": run("rev-parse", "--short", "HEAD"), "dirty": bool(run("status", "--short"))}


def server_version(url: str | None = None) -> str:
    with pg_connect(url) as conn:
        return str(conn.execute("SHOW server_version").fetchone()[0])


def versions(url: str | None = None, **extra: str | None) -> dict[str, Any]:
    sys.path.insert(0, str(REPO_ROOT))
    import weft_django

    return {
        "weft_django": getattr(weft_django, "__version__", None),
        "python": platform.python_version(),
        "django": _version("Django"),
        "psycopg": _version("psycopg"),
        "postgresql": server_version(url),
        "matplotlib": _version("matplotlib"),
        "celery": _version("celery"),
        "kombu": _version("kombu"),
        "redis_py": _version("redis"),
        "git": _git(),
        **extra,
    }


class Machine:
    """``nproc``, CPU model and the load average at start and at end."""

    def __init__(self) -> None:
        self.start = loadavg()
        self.started = time.monotonic()

    def finish(self) -> dict[str, Any]:
        return {
            "nproc": os.cpu_count(),
            "cpu": _cpu_model(),
            "platform": platform.platform(),
            "load_average_start": self.start,
            "load_average_end": loadavg(),
            "load_average_note": "1-, 5- and 15-minute load averages (os.getloadavg)",
            "wall_s": round(time.monotonic() - self.started, 1),
        }


#: Settings every benchmark runs under (reported in each JSON document).
PROCESS_SETTINGS = {
    "DJANGO_DEBUG": "0 (project/settings.py defaults to DEBUG=True; off like production)",
    "DJANGO_SETTINGS_MODULE": "project.settings",
    "CONN_MAX_AGE": "0 (Django's default; the project does not set it)",
}


def document(
    name: str,
    *,
    mode: str,
    figures: dict[str, Any],
    baseline: dict[str, Any],
    ratio: dict[str, Any],
    settings: dict[str, Any],
    machine: Machine,
    notes: Sequence[str] = (),
    url: str | None = None,
    pngs: Sequence[str] = (),
    extra_versions: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    return {
        "benchmark": name,
        "mode": mode,
        "figures": figures,
        "baseline": baseline,
        "ratio": ratio,
        "settings": {**settings, "process": PROCESS_SETTINGS},
        "versions": versions(url, **(extra_versions or {})),
        "machine": machine.finish(),
        "notes": list(notes),
        "png": list(pngs),
    }


def size_parser(doc: str | None) -> argparse.ArgumentParser:
    """The arguments every benchmark takes: ``--quick`` (default) / ``--full``, ``--no-publish``."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true")
    size.add_argument("--full", action="store_true")
    parser.add_argument("--no-publish", action="store_true", help="keep PNGs out of docs/img")
    return parser


def simple_main(
    run: Callable[..., dict[str, Any]], doc: str | None, argv: list[str] | None = None
) -> int:
    """``main`` of a benchmark whose ``run`` takes only ``quick`` and ``publish``."""
    args = size_parser(doc).parse_args(argv)
    emit(run(quick=not args.full, publish=not args.no_publish))
    return 0


def emit(doc: dict[str, Any]) -> None:
    """Print the ONE JSON document and keep a copy in ``benchmarks/out/``."""
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=2, sort_keys=False, default=str)
    (OUT_DIR / f"{doc['benchmark']}.json").write_text(text + "\n")
    print(text, flush=True)


def publish_png(fig: Any, name: str, publish: bool = True) -> str:
    """Save ``fig`` as ``benchmarks/out/bench-<name>.png`` (and docs/img/ when asked)."""
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"bench-{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    if publish:
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMG / path.name)
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
