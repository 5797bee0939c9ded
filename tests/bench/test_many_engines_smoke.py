"""Smoke test of ``benchmarks.many_engines`` at toy size: 3 engines, 2 s windows.

Why: the benchmark boots 102 engine processes at its published size and is
never part of the suite, so without this its reading code (the server's
counters from another database, ``/proc`` CPU and RSS, the connections by
``application_name``, the spread from the claim history) would rot unnoticed.
Each figure is asserted *read* (present, of the right kind, consistent with
the others); none is asserted against a time bound.

PostgreSQL only (``processes`` tier): it counts PostgreSQL sessions and backends.
Its database and output are the smoke tests' own (``test_smoke._smoke_env``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.bench.test_smoke import REPO_ROOT, _smoke_env

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="counts PostgreSQL sessions and backends"
    ),
]

ENGINES = 3
RUNS = 9
WINDOW_S = 2.0


def _check_idle(idle: dict[str, Any], engines: int, statements: bool) -> None:
    from benchmarks.many_engines import FIGURES

    assert idle["engines"] == engines
    assert idle["window_s"] >= WINDOW_S  # the window was slept, not skipped
    for key in FIGURES:
        if key == "statements_per_s" and not statements:
            assert idle[key] is None
            continue
        assert isinstance(idle[key], int | float) and idle[key] >= 0, (key, idle[key])
    # Every engine holds sessions of its own, named after it; its memory is real.
    assert idle["connections"] >= 1 and idle["connections_max"] >= idle["connections"]
    assert idle["rss_mib"] > 10
    # An idle engine still polls (the backstop): its transactions were counted.
    assert idle["xact_per_s"] > 0
    if statements:
        assert idle["top_statements"] and idle["statements_per_s"] > 0
        assert idle["statement_exec_ms_per_s"] > 0
        assert {"calls_per_s_per_engine", "exec_ms_per_s_per_engine", "query"} == set(
            idle["top_statements"][0]
        )
    else:
        assert idle["statement_exec_ms_per_s"] is None


def test_many_engines_smoke(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "benchmarks.many_engines", "--quick", "--no-publish"]
    argv += ["--engines", str(ENGINES), "--window", str(WINDOW_S), "--warmup", "1"]
    argv += ["--runs", str(RUNS)]
    done = subprocess.run(
        argv, cwd=REPO_ROOT, env=_smoke_env(tmp_path), capture_output=True, text=True, timeout=400
    )
    logs = "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
        for p in sorted((tmp_path / "logs").glob("*.log"))
    )
    assert done.returncode == 0, f"{done.stderr[-5000:]}\n{logs}"

    doc = json.loads((tmp_path / "many_engines.json").read_text())
    assert doc == json.loads(done.stdout)  # the one document, printed and kept
    statements = doc["settings"]["pg_stat_statements"] == "available"
    assert set(doc["settings"]["modes"]) == {"polling", "polling_1s", "notify"}
    for mode in doc["settings"]["modes"]:
        figures = doc["figures"][mode]
        _check_idle(figures["1_engine"]["idle"], 1, statements)
        _check_idle(figures[f"{ENGINES}_engines"]["idle"], ENGINES, statements)
        assert doc["baseline"][mode] == figures["1_engine"]["idle"]
        spread = figures[f"{ENGINES}_engines"]["spread"]
        assert spread["runs"] == RUNS and spread["engines"] == ENGINES
        assert 1 <= spread["engines_that_drove"] <= ENGINES
        assert spread["finished_s"]["n"] == RUNS and spread["takeovers"] >= 0
        assert spread["all_complete_s"] == spread["finished_s"]["max"] > 0
        # One first pickup per engine that claimed; every run claimed exactly once.
        assert spread["first_pickup_ms"]["n"] == spread["engines_that_claimed"] >= 1
        claimed = spread["runs_claimed_per_engine"]
        assert claimed["n"] == ENGINES and round(claimed["mean"] * ENGINES) == RUNS
        assert figures[f"{ENGINES}_engines"]["connections_after_spread"] >= 1
        ratio = doc["ratio"][mode]
        assert ratio["xact_per_s"] is not None and ratio["xact_per_s"] > 0
        assert ratio["rss_mib"] is not None and ratio["rss_mib"] > 0
    assert doc["ratio"]["headline"]["value"] == doc["ratio"]["notify"]["xact_per_s"]
    assert doc["png"] and Path(doc["png"][0]).exists()
