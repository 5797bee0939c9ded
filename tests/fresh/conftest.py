"""Fixtures of the fresh-project tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fresh.support import build_wheel


@pytest.fixture(scope="session")
def weft_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built once per session from a clean copy of the sources."""
    return build_wheel(tmp_path_factory.mktemp("wheel-build"))
