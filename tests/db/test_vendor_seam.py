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


#: Where statements may be written by hand: the vendor seam, and the NOTIFY
#: transport's own LISTEN connection.
SQL_HOMES = ("db", "transports/notify", "migrations")
RAW_SQL = re.compile(r"\.cursor\(|\.vendor\b|\bvendor\s*[!=]=")


def _outside_the_seam() -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if not str(path.relative_to(PACKAGE)).startswith(SQL_HOMES)
    ]


@pytest.mark.parametrize("path", _outside_the_seam(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_raw_sql_or_vendor_branch_outside_the_seam(path: Path) -> None:
    found = RAW_SQL.search(path.read_text())
    assert not found, f"{path.relative_to(PACKAGE)} holds {found.group(0)!r}: move it to db/"


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
