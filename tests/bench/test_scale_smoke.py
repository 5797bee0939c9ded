"""Smoke test of ``benchmarks.scale`` at toy sizes (50 and 500 parked workflows).

Why: the benchmark is never part of the suite (its full run seeds a million
journal rows), so without this it rots unnoticed. At toy sizes it still
seeds both histories with the set-based SQL, boots the measured engine and
the picker, logs a superuser in and runs every operation: the JSON document
must hold a measured figure, a baseline and a ratio for each of them. No
timing is asserted (toy sizes on a shared machine say nothing about cost).

Its own database and output directory (``tests.bench.test_smoke``'s
environment), so a real benchmark run is never disturbed. PostgreSQL only
(``processes`` tier, deselected on the SQLite leg).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.test_smoke import REPO_ROOT, _smoke_env

pytestmark = [pytest.mark.processes]


def test_scale_smoke(tmp_path: Path) -> None:
    env = _smoke_env(tmp_path)
    argv = [sys.executable, "-m", "benchmarks.scale", "--quick", "--no-publish"]
    argv += ["--small", "50", "--large", "500", "--reps", "2"]
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]

    doc = json.loads((tmp_path / "scale.json").read_text())
    assert doc == json.loads(done.stdout)  # the one document, printed and kept
    assert doc["benchmark"] == "scale"
    from benchmarks.scale import OPERATIONS

    assert len(OPERATIONS) == 8
    for side in ("figures", "baseline"):
        ops = doc[side]["operations"]
        assert set(ops) == set(OPERATIONS), side
        for name, op in ops.items():
            assert op["ms"] > 0 and len(op["ms_all"]) == 2, (side, name)
            assert op["statements"] and min(op["statements"]) >= 1, (side, name)
    for name in OPERATIONS:
        assert doc["ratio"][name] > 0
        assert doc["ratio"]["of_minimums"][name] > 0
    assert isinstance(doc["ratio"]["met"], bool)
    # The two histories really were the sizes asked, with about ten journal rows a run.
    assert doc["baseline"]["history"]["rows"]["runs"] == 50
    assert doc["figures"]["history"]["rows"]["runs"] == 500
    assert doc["figures"]["history"]["rows"]["claims"] == 500
    assert doc["figures"]["history"]["rows"]["journal_rows"] >= 10 * 499
    assert doc["settings"]["small"] == 50 and doc["settings"]["large"] == 500
    assert set(doc["machine"]) >= {"nproc", "load_average_start", "load_average_end"}
    assert doc["png"] and Path(doc["png"][0]).exists()
