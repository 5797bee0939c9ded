"""Smoke tests of the benchmark scripts: one tiny Celery throughput case, the
runtime benchmark at toy sizes, the replay-check benchmark at 12 runs, the bulk
benchmark at 60 runs, the CPU split at 12 runs, and the peers benchmark at
toy size (its DBOS legs only when ``benchmarks/.venv-dbos`` exists).

Why: ``python -m benchmarks`` is never part of the suite (minutes long and
noisy), so without this the scripts rot unnoticed. One configuration
exercises most of the shared code — database set-up, the exact commit
counter, pgbench, a real ``celery -A project worker`` node, the producer as
a Celery web process, the JSON document — in about half a minute; the
standalone-engine path is the same code minus the Celery parts.

It runs on its own database (``weft_bench_smoke``, on the server of
``DATABASE_URL``), its own Redis database (11) and writes its output to a
temporary directory, so a real benchmark run is never disturbed. Nothing
here asserts an upper bound on a duration (only that a sleep slept).

PostgreSQL only (``processes`` tier, deselected on the SQLite leg).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.processes]

REPO_ROOT = Path(__file__).resolve().parents[2]
#: ``WEFT_BENCH_SMOKE_DB`` / ``WEFT_BENCH_SMOKE_BROKER`` move them (parallel checkouts).
SMOKE_DB = os.environ.get("WEFT_BENCH_SMOKE_DB", "weft_bench_smoke")
SMOKE_BROKER = os.environ.get("WEFT_BENCH_SMOKE_BROKER", "redis://127.0.0.1:6379/11")


def _smoke_env(out: Path, **extra: str) -> dict[str, str]:
    """The environment of a benchmark child: the smoke database and broker (never
    the real benchmarks'), output under ``out``, the repository importable."""
    from benchmarks.common import with_database

    url = os.environ.get("DATABASE_URL", "")
    assert url.startswith(("postgres://", "postgresql://")), "the benchmarks need PostgreSQL"
    env = dict(os.environ)
    env.update(
        WEFT_BENCH_URL=with_database(url, SMOKE_DB),
        WEFT_BENCH_BROKER=SMOKE_BROKER,
        WEFT_BENCH_OUT=str(out),
        PYTHONPATH=str(REPO_ROOT),
        **extra,
    )
    return env


def test_celery_throughput_smoke(tmp_path: Path) -> None:
    env = _smoke_env(tmp_path)
    argv = [
        sys.executable,
        "-m",
        "benchmarks.throughput",
        "--quick",
        "--no-publish",
        "--runs",
        "3",
        "--counts",
        "1",
        "--transport",
        "celery",
        "--no-peer",
        "--pgbench-seconds",
        "1",
    ]
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    logs = "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
        for p in sorted((tmp_path / "logs").glob("*.log"))
    )
    assert done.returncode == 0, f"{done.stderr[-5000:]}\n{logs}"

    doc = json.loads((tmp_path / "throughput.json").read_text())
    figures = doc["figures"]["1_celery_nodes"]
    assert figures["runs"] == 3
    assert figures["workflows_per_s"] > 0
    assert figures["claim_attempts"]["acquired"] >= 3
    assert doc["settings"]["transports"] == ["celery"]
    assert doc["figures"]["commits_per_workflow_exact"]["write_commits"] > 0
    assert "1_celery_nodes_vs_limit" in doc["ratio"]  # pgbench ran: the same-run baseline
    assert set(doc["machine"]) >= {"nproc", "load_average_start", "load_average_end"}
    assert doc["png"] and Path(doc["png"][0]).exists()


def test_runtime_smoke(tmp_path: Path) -> None:
    """``benchmarks.runtime`` at toy sizes: every part runs and the document holds."""
    env = _smoke_env(tmp_path)
    argv = [sys.executable, "-m", "benchmarks.runtime", "--quick", "--no-publish"]
    argv += ["--histories", "2,12", "--window", "3", "--fanout-width", "2"]
    argv += ["--fanout-seconds", "0.05", "--fanout-repeats", "1", "--parked", "12"]
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-5000:]

    doc = json.loads((tmp_path / "runtime.json").read_text())
    assert doc == json.loads(done.stdout)  # the one document, printed and kept
    cpu = doc["figures"]["cpu_per_step"]
    assert cpu["cache_off"]["cache"] in {"off", "unavailable"}
    assert cpu["cache_on"]["cache"] in {"on", "unavailable"}
    points = cpu["cache_off"]["points"]
    assert set(points) == {"2", "12"}
    assert points["2"]["steps_measured"] == [1, 4]  # centred on history 2: steps 1..3
    assert points["12"]["steps_measured"] == [11, 14]
    # Two journal entries a step (the signal, the activity); every step took a real turn.
    assert points["12"]["journal_entries_after"] >= 2 * 14
    assert all(p["turn_cpu_ms"] > 0 and min(p["turns_per_step"]) >= 1 for p in points.values())
    assert "step@12/step@2" in doc["ratio"]["cpu_cache_off"]
    fan = doc["figures"]["fanout"]
    assert fan["width"] == 2 and len(fan["one_ms_all"]) == len(fan["all_ms_all"]) == 1
    assert fan["all_ms"] >= 50  # the activities really slept
    memory = doc["figures"]["rss"]
    assert memory["cache_off"]["parked"] == 12
    assert memory["cache_off"]["rss_mib_parked"] > 0
    assert set(doc["machine"]) >= {"nproc", "load_average_start", "load_average_end"}
    assert doc["png"] and Path(doc["png"][0]).exists()


@pytest.fixture(scope="module")
def peers_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One toy ``benchmarks.peers`` run (3 sequential, 4 burst, 1 repeat, 1 and 2
    engines), shared by the weft/Celery test and the DBOS one."""
    out = tmp_path_factory.mktemp("peers")
    env = _smoke_env(out, WEFT_BENCH_DBOS_DB=f"{SMOKE_DB}_dbos")
    argv = [sys.executable, "-m", "benchmarks.peers", "--quick", "--no-publish"]
    argv += ["--runs-sequential", "3", "--runs-burst", "4", "--repeats", "1", "--counts", "1,2"]
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    logs = "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
        for p in sorted((out / "logs").glob("*.log"))
    )
    assert done.returncode == 0, f"{done.stderr[-5000:]}\n{logs}"
    doc: dict[str, Any] = json.loads((out / "peers.json").read_text())
    assert doc == json.loads(done.stdout)  # the one document, printed and kept
    return doc


def test_peers_weft_and_celery_smoke(peers_doc: dict[str, Any]) -> None:
    """The weft and Celery chain legs always run, whatever DBOS does."""
    seq, burst = peers_doc["figures"]["sequential"], peers_doc["figures"]["burst"]
    for leg in ("weft", "celery_chain"):
        assert seq[leg]["repeats"][0]["runs"] == 3
        assert seq[leg]["repeats"][0]["latency_ms"]["n"] == 3
        assert seq[leg]["p50_ms"] > 0
    assert set(burst) >= {"weft_1_engines", "weft_2_engines", "celery_chain"}
    assert all(burst[k]["repeats"][0]["runs"] == 4 for k in burst)
    targets = peers_doc["ratio"]["targets"]
    assert set(targets) >= {"sequential_p50_vs_dbos", "burst_1_vs_dbos", "burst_1_vs_celery"}
    assert targets["burst_1_vs_celery"]["ratio"] > 0
    assert targets["burst_2_vs_1"]["met"] in (True, False)
    assert targets["burst_4_vs_2"]["ratio"] is None  # 4 engines were not asked for
    assert set(peers_doc["machine"]) >= {"nproc", "load_average_start", "load_average_end"}
    assert peers_doc["png"] and Path(peers_doc["png"][0]).exists()


def test_peers_dbos_smoke(peers_doc: dict[str, Any]) -> None:
    """The DBOS legs ran, or the document says exactly why they did not."""
    from benchmarks.common import DBOS_VENV

    figures, targets = peers_doc["figures"], peers_doc["ratio"]["targets"]
    if not (DBOS_VENV / "bin" / "python").exists():
        assert "does not exist" in figures["dbos_skipped"]
        assert targets["sequential_p50_vs_dbos"]["met"] is None
        pytest.skip(f"DBOS legs skipped (reported in the document): {DBOS_VENV} does not exist")
    assert "dbos_skipped" not in figures, figures.get("dbos_skipped")
    for leg in ("dbos", "dbos_in_process"):
        assert figures["sequential"][leg]["repeats"][0]["latency_ms"]["n"] == 3
    assert figures["burst"]["dbos"]["workflows_per_s"] > 0
    assert targets["sequential_p50_vs_dbos"]["ratio"] > 0


def test_replay_check_smoke(tmp_path: Path) -> None:
    """``benchmarks.replay_check`` at 12 runs: every run parked and replayed, in
    chunked reads (a handful of queries, not one per run)."""
    env = _smoke_env(tmp_path)
    argv = [sys.executable, "-m", "benchmarks.replay_check", "--quick", "--runs", "12"]
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-5000:]
    doc = json.loads((tmp_path / "replay_check.json").read_text())
    assert doc == json.loads(done.stdout)
    figures = doc["figures"]
    assert figures["runs"] == figures["checked"] == 12
    assert figures["runs_per_s"] > 0 and doc["baseline"]["one_journal_query_per_run_runs_per_s"] > 0
    assert figures["queries"] <= 4  # names, one chunk, its journals: not one per run


def test_bulk_smoke(tmp_path: Path) -> None:
    """``benchmarks.bulk`` at 60 runs: every bulk operation changes every run,
    in chunked batches (statements per run well under one), and the baselines run."""
    env = _smoke_env(tmp_path)
    argv = [sys.executable, "-m", "benchmarks.bulk", "--quick", "--runs", "60", "--single", "5"]
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-5000:]
    doc = json.loads((tmp_path / "bulk.json").read_text())
    assert doc == json.loads(done.stdout)
    figures = doc["figures"]
    assert figures["runs"] == 60 and figures["cancel_many_chunks"] == 1
    assert figures["cancel_many_runs_per_s"] > 0 and figures["retry_many_runs_per_s"] > 0
    assert figures["cancel_many_statements_per_run"] < 1
    assert doc["baseline"]["client_cancel_one_by_one_runs_per_s"] > 0
    assert "cancel_many [" in done.stderr  # the progress bar


def test_cpu_split_smoke(tmp_path: Path) -> None:
    """The profile of issue #15's closing note: two engines at concurrency 2
    drain 12 runs; every CPU figure is read and the machine share is a share."""
    env = _smoke_env(tmp_path)
    argv = [sys.executable, "-m", "benchmarks.cpu_split", "--engines", "2"]
    argv += ["--concurrency", "2", "--runs", "12"]
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-5000:]
    doc = json.loads(done.stdout)
    figures = doc["figures"]
    assert figures["workflows_per_s"] > 0 and figures["window_s"] > 0
    assert len(figures["engine_cpu_ms_per_workflow"]) == 2
    assert figures["engines_cpu_ms_per_workflow"] > 0  # the engines did the work
    assert figures["postgres_cpu_ms_per_workflow"] > 0
    # A share of the machine: at most 1, give or take the sampling of busy time
    # (on a loaded machine the two readings are a few ms apart).
    assert 0 < figures["machine_busy_share"] <= 1.1
    assert doc["settings"] == {
        "engines": 2,
        "concurrency": 2,
        "runs": 12,
        "process": doc["settings"]["process"],
    }
    bad = [
        a
        for a in ("--engines", "--runs")
        if subprocess.run(
            [sys.executable, "-m", "benchmarks.cpu_split", a, "0"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        ).returncode
        != 2
    ]
    assert bad == [], f"{bad} accepted 0"
