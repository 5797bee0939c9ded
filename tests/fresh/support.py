"""What the fresh-project tests share: running a child with nothing of this
repository on its path, and the wheel a newcomer would install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import REPO_ROOT

COMMAND_TIMEOUT_S = 120.0  # one subprocess (venv creation, pip, migrate, ...)


def run(
    args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = COMMAND_TIMEOUT_S
) -> str:
    """Run ``args`` to completion; its stdout, or an error with both streams."""
    proc = subprocess.run(
        args,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {proc.returncode}\n"
            f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    return proc.stdout


def clean_env(*, network: bool = False, **extra: str) -> dict[str, str]:
    """The parent's environment minus everything that points at this repository.

    pip stays off the network unless ``network`` is set (a test that installs
    from the registry says so).
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "VIRTUAL_ENV")
        and not k.startswith(("WEFT_", "PYTEST_"))
    }
    env["PYTHONNOUSERSITE"] = "1"
    if not network:
        env["PIP_NO_INDEX"] = "1"  # never reach for the network
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.update(extra)
    return env


def build_wheel(root: Path) -> Path:
    """The wheel, built under ``root`` from a clean copy of the sources."""
    src = root / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "CHANGELOG.md", "MANIFEST.in"):
        shutil.copy2(REPO_ROOT / name, src / name)
    shutil.copytree(
        REPO_ROOT / "weft_django",
        src / "weft_django",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    wheelhouse = root / "wheelhouse"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(wheelhouse),
            str(src),
        ],
        cwd=root,
        env=clean_env(),
    )
    wheels = sorted(wheelhouse.glob("weft_django-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]
