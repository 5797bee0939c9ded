"""``examples/typed/`` passes ``mypy --strict`` and pyright (strict), and both
infer what each ``reveal_type`` line's ``# expect:`` comment says: an awaited
``ctx.run`` is the activity's declared result, ``client.start(order, ...)
.result()`` the workflow's (``Receipt``), a name string ``Any``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "typed"
REVEAL = EXAMPLE / "reveal.py"
BIN = Path(sys.executable).parent


def _expectations() -> dict[int, str]:
    found: dict[int, str] = {}
    for number, line in enumerate(REVEAL.read_text().splitlines(), start=1):
        match = re.search(r"reveal_type\(.*# expect: (.+)$", line)
        if match:
            found[number] = match.group(1).strip()
    assert len(found) >= 5
    return found


def _run(args: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYRIGHT_PYTHON_FORCE_VERSION": "1.1.408"}
    done = subprocess.run(
        args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def _unqualified(type_text: str) -> str:
    """``examples.typed.workflows.Receipt`` -> ``Receipt`` (mypy names the module)."""
    return re.sub(r"\b(?:\w+\.)+(\w+)", r"\1", type_text)


def test_mypy_strict_passes_and_reveals_the_declared_types() -> None:
    output = _run([str(BIN / "mypy"), "--strict", "--no-incremental", "examples/typed"])
    revealed = {
        int(m.group(1)): _unqualified(m.group(2))
        for m in re.finditer(r'reveal\.py:(\d+): note: Revealed type is "(.+)"', output)
    }
    assert revealed == _expectations(), output


def test_pyright_strict_passes_and_reveals_the_declared_types() -> None:
    output = _run(
        [
            str(BIN / "pyright"),
            "-p",
            "examples/typed/pyrightconfig.json",
            "--pythonpath",
            sys.executable,
        ]
    )
    assert "0 errors" in output, output
    revealed = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r'reveal\.py:(\d+):\d+ - information: Type of ".*" is "(.+)"', output)
    }
    assert revealed == _expectations(), output
