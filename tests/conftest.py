"""Test-wide fixtures. The database under test comes from DATABASE_URL."""

from __future__ import annotations

import pytest

from tests.support import ManualClock

pytest_plugins = ["weft_django.testing"]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def vendor() -> str:
    from django.db import connection

    return connection.vendor
