"""Test-wide fixtures. The database under test comes from DATABASE_URL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported in the fixture: pytest must load the plugin below first
    from tests.support import ManualClock

pytest_plugins = ["weft_django.testing"]

#: Test directories whose tests share a broker (each its own Redis database; the
#: Celery tests also the RabbitMQ ``weft`` queue) and flush or purge it: under
#: pytest-xdist (``scripts/test`` runs ``-n``) each directory's tests run on one
#: worker, one after another; different directories may run side by side.
SHARED_BROKER_DIRS = ("celery", "chaos", "bench")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep each directory's broker tests on one xdist worker (``--dist
    loadgroup``): two workers purging one queue would discard each other's
    messages."""
    for item in items:
        parts = item.path.parts
        if "tests" in parts:
            below = parts[parts.index("tests") + 1 :]
            if below and below[0] in SHARED_BROKER_DIRS:
                item.add_marker(pytest.mark.xdist_group(f"broker-{below[0]}"))


@pytest.fixture
def clock() -> ManualClock:
    """The suite's clock: a ``FakeClock`` at 1 000 000 ms whose ``advance`` takes ms."""
    from tests.support import ManualClock

    return ManualClock()


@pytest.fixture
def vendor() -> str:
    from django.db import connection

    return connection.vendor


@pytest.fixture
def batch_db(transactional_db: None) -> None:
    """Database access for tests of the conditional batch (``transactional_db``).

    Why not the default ``django_db`` (each test inside one transaction, rolled
    back): a batch inside the caller's transaction is a savepoint, and a nested
    batch never retries a deadlock or a "database is locked" (it cannot, inside
    an aborted outer transaction); a thread's batch would not see the test's
    uncommitted rows either. Tests of batches, claims, folds and guards need
    each batch to own its transaction, as it does in an engine. Use it with
    ``pytestmark = pytest.mark.usefixtures("batch_db")``.
    """


@pytest.fixture(autouse=True)
def _no_leftover_engine_clock() -> Iterator[None]:
    """An engine booted with an injected clock installs it process-wide until
    ``dispose()``; a test that never disposes its engine must not leak that
    clock into the next test's ``client`` calls."""
    from weft_django.clock import process_clock

    before = process_clock.installed()
    yield
    process_clock.restore(before)


@pytest.fixture(autouse=True)
def _no_leftover_presence() -> Iterator[None]:
    """An engine a test never disposed keeps its presence connection (PostgreSQL)
    open: close it, so it neither outlives the test nor blocks dropping the
    test database."""
    yield
    from weft_django.ownership import presence

    presence.close_all()


@pytest.fixture(autouse=True)
def _no_leftover_done_listener() -> Iterator[None]:
    """``result()`` keeps one shared ``LISTEN weft_done`` session open per
    process; closed after each test so the test database can be dropped."""
    yield
    from weft_django.transports.notify import close_done_hubs

    close_done_hubs()
