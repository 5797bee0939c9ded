"""The start statement behind the vendor seam.

Invariants protected: the one-statement start is a capability of the ops
object (``supports_start_statement`` / ``insert_start``), PostgreSQL's only;
the client and the engine's start path never branch on a vendor themselves.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import weft_django
from weft_django import db as store

PACKAGE = Path(weft_django.__file__).parent
VENDOR_BRANCH = re.compile(r"\bvendor\s*[!=]=")
START_PATH = ["client", "engine/operations", "engine/schedules", "engine/turn"]


@pytest.mark.parametrize(
    "path",
    [path for folder in START_PATH for path in sorted((PACKAGE / folder).glob("*.py"))],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_the_start_path_asks_the_seam(path: Path) -> None:
    assert not VENDOR_BRANCH.search(path.read_text()), f"{path.name} compares a vendor"


def test_the_start_statement_is_postgresqls_capability(vendor: str) -> None:
    assert store.ops("default").supports_start_statement is (vendor == "postgresql")
    assert not store.vendor_ops("mysql").supports_start_statement
    with pytest.raises(NotImplementedError):
        store.vendor_ops("mysql").insert_start(None, after_finished=False, notify=None, using="x")  # type: ignore[arg-type]
