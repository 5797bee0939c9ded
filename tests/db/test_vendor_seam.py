"""The vendor seam (``weft_django.db``): one place for database-specific SQL.

Invariants protected: the protocol package, the checks and the settings
never branch on a database vendor themselves -- they ask ``db.ops(alias)``
and its capability flags; the ops object matches the database the suite
runs on; the old import paths of the moved modules keep working; and the
batch vocabulary depends on nothing that runs a batch.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import weft_django
from weft_django import db as store
from weft_django.db.base import StoreOps

PACKAGE = Path(weft_django.__file__).parent
VENDOR_BRANCH = re.compile(r"\bvendor\s*[!=]=")


@pytest.mark.parametrize(
    "path",
    [*sorted((PACKAGE / "ownership").glob("*.py")), *sorted((PACKAGE / "checks").glob("*.py")), *sorted((PACKAGE / "conf").glob("*.py"))],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_no_vendor_branch_outside_the_seam(path: Path) -> None:
    assert not VENDOR_BRANCH.search(path.read_text()), f"{path.name} compares a vendor"


def test_ops_matches_the_database_in_use(vendor: str) -> None:
    ops = store.ops("default")
    assert isinstance(ops, StoreOps)
    assert ops.vendor == vendor
    assert ops.supports_claim_statement is (vendor == "postgresql")
    assert ops.supports_joint_lock is (vendor == "postgresql")
    assert ops.supports_session_presence is (vendor == "postgresql")


def test_an_unknown_vendor_gets_the_portable_ops() -> None:
    assert type(store.vendor_ops("mysql")) is StoreOps
    assert not store.vendor_ops("mysql").supports_claim_statement


def test_the_configured_vendor_comes_from_the_backend_class() -> None:
    assert store.configured_vendor({"ENGINE": "django.db.backends.sqlite3"}) == "sqlite"
    assert store.configured_vendor({"ENGINE": "no.such.backend"}) == "unknown"


def test_the_vocabulary_imports_no_executor() -> None:
    tree = ast.parse((PACKAGE / "ownership" / "ops.py").read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "weft_django.ownership.batch" not in imported
