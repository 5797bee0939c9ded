"""Fixtures of the database tier."""

from __future__ import annotations

import pytest


@pytest.fixture
def batch_db(transactional_db: None) -> None:
    """A database whose transactions really commit (pytest-django's
    ``transaction=True``).

    Why: the conditional batch retries deadlocks and busy databases only when
    it owns its transaction -- nested in a test's wrapping transaction it
    cannot -- and the tests here run batches from several threads and
    connections, which see only committed rows.
    """
