"""The supported Python × Django versions, said once in each place that says them.

pyproject.toml (the Django range and the classifiers), README's "Supported
versions" table and the test legs of ``scripts/legs`` must agree; the
interpreter and Django under test must be a supported pair, and under
``scripts/test`` (which sets ``WEFT_TEST_LEG``) exactly that leg's, so a leg
whose venv resolved another Django fails here instead of passing quietly.
``find_python`` (scripts/legs) must fail, naming the interpreter, when one is
missing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import NamedTuple

import django
from packaging.requirements import Requirement
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parents[2]
LEGS_SH = REPO_ROOT / "scripts" / "legs"


class Leg(NamedTuple):
    name: str
    python: str
    django: str
    venv: str
    pg_db: str
    sqlite: str


def _pyproject() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def _classified(prefix: str) -> set[str]:
    """``X.Y`` of every classifier ``prefix :: X.Y``."""
    out = set()
    for c in _pyproject()["project"]["classifiers"]:
        m = re.fullmatch(re.escape(prefix) + r" :: (\d+\.\d+)", c)
        if m:
            out.add(m.group(1))
    return out


def _django_requirement() -> Requirement:
    reqs = [Requirement(r) for r in _pyproject()["project"]["dependencies"]]
    (req,) = [r for r in reqs if r.name.lower() == "django"]
    return req


def _readme_matrix() -> dict[tuple[str, str], str]:
    """README's table: ``(python, django) -> cell`` ("tested", "yes" or "no")."""
    lines = (REPO_ROOT / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Python | Django"))
    head = [c.strip() for c in lines[start].strip("|").split("|")]
    series = [re.match(r"Django (\d+\.\d+)", h).group(1) for h in head[1:]]  # type: ignore[union-attr]
    matrix: dict[tuple[str, str], str] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        for dj, cell in zip(series, cells[1:], strict=True):
            kind = "tested" if "tested" in cell else "yes" if cell.startswith("✓") else "no"
            assert kind != "no" or cell.startswith("—"), f"README: unreadable cell {cell!r}"
            matrix[(cells[0], dj)] = kind
    return matrix


def _bash(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"source {LEGS_SH}; {script}"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )


def _legs() -> list[Leg]:
    proc = _bash(
        'for leg in "${WEFT_LEGS[@]}"; do leg_vars "$leg"; printf "%s\\t" "$leg" "$LEG_PY" '
        '"$LEG_DJANGO" "$LEG_VENV" "$LEG_PG_DB" "$LEG_SQLITE"; echo; done'
    )
    assert proc.returncode == 0, proc.stderr
    return [Leg(*line.rstrip("\t").split("\t")) for line in proc.stdout.splitlines()]


def _series_admitted(spec: str) -> set[str]:
    """The Django series (5.0 … 7.2; each major has X.0, X.1 and X.2, the LTS) whose
    .0 release ``spec`` admits."""
    req = Requirement(spec)
    candidates = [f"{major}.{minor}" for major in (5, 6, 7) for minor in range(3)]
    return {s for s in candidates if Version(f"{s}.0") in req.specifier}


def test_the_django_range_admits_exactly_the_classified_series() -> None:
    classified = _classified("Framework :: Django")
    assert classified == {"5.2", "6.0", "6.1"}
    assert _series_admitted(str(_django_requirement())) == classified


def test_readme_table_matches_the_classifiers() -> None:
    matrix = _readme_matrix()
    assert {py for py, _ in matrix} == _classified("Programming Language :: Python")
    assert {dj for _, dj in matrix} == _classified("Framework :: Django")
    # Django 6 needs Python 3.12 or newer; the LTS runs on all three.
    assert matrix[("3.11", "6.0")] == matrix[("3.11", "6.1")] == "no"
    assert all(matrix[(py, "5.2")] != "no" for py in ("3.11", "3.12", "3.13"))


def test_the_legs_are_the_tested_cells_and_share_nothing() -> None:
    legs = _legs()
    matrix = _readme_matrix()
    tested = {pair for pair, kind in matrix.items() if kind == "tested"}
    pairs = set()
    for leg in legs:
        (series,) = _series_admitted(leg.django)  # one Django series per leg
        pairs.add((leg.python, series))
    assert pairs == tested
    assert legs[0].venv == ".venv"  # scripts/demo, scripts/chaos and the linters use it
    for field in ("venv", "pg_db", "sqlite"):
        values = [getattr(leg, field) for leg in legs]
        assert len(set(values)) == len(values), f"two legs share a {field}: {values}"


def test_this_interpreter_and_django_are_supported() -> None:
    py = "{}.{}".format(*sys.version_info[:2])
    dj = "{}.{}".format(*django.VERSION[:2])
    assert _readme_matrix().get((py, dj), "no") != "no", f"Python {py} + Django {dj}"
    assert Version(django.__version__) in _django_requirement().specifier
    leg_name = os.environ.get("WEFT_TEST_LEG")
    if leg_name:  # under scripts/test: exactly the leg it announced
        (leg,) = [leg for leg in _legs() if leg.name == leg_name]
        assert py == leg.python, f"leg {leg_name} runs Python {py}"
        assert Version(django.__version__) in Requirement(leg.django).specifier, (
            f"leg {leg_name} runs Django {django.__version__}, not {leg.django}"
        )


def test_find_python_names_a_missing_interpreter() -> None:
    proc = _bash("find_python 3.99", PATH="/usr/bin:/bin")
    assert proc.returncode == 1 and proc.stdout == ""
    assert "Python 3.99 is missing" in proc.stderr and "WEFT_PY399" in proc.stderr

    proc = _bash("find_python 3.11", WEFT_PY311="/nonexistent/python3.11")
    assert proc.returncode == 1
    assert "WEFT_PY311=/nonexistent/python3.11 is not a working Python 3.11" in proc.stderr


def test_find_python_takes_the_variable_and_checks_the_version() -> None:
    here = "{}.{}".format(*sys.version_info[:2])
    var = "WEFT_PY" + here.replace(".", "")
    proc = _bash(f"find_python {here}", **{var: sys.executable})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == sys.executable
    # An interpreter of another minor version is refused, whatever the variable says.
    other = "3.11" if here != "3.11" else "3.13"
    proc = _bash(f"find_python {other}", **{"WEFT_PY" + other.replace(".", ""): sys.executable})
    assert proc.returncode == 1 and f"not a working Python {other}" in proc.stderr
