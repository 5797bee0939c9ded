"""Test-wide fixtures. The database under test comes from DATABASE_URL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported in the fixture: pytest must load the plugin below first
    from tests.support import ManualClock

pytest_plugins = ["weft_django.testing"]

#: Test directories whose tests share a broker (each its own Redis database; the
#: Celery tests also the RabbitMQ ``weft`` queue) and flush or purge it: under
#: pytest-xdist (``scripts/test`` runs ``-n``) each directory's tests run on one
#: worker, one after another; different directories may run side by side.
SHARED_BROKER_DIRS = ("celery", "chaos", "bench")


def broker_group(nodeid: str) -> str | None:
    """The xdist work unit of a test in a broker-sharing directory, else ``None``."""
    parts = nodeid.split("::", 1)[0].split("/")
    if "tests" in parts:
        below = parts[parts.index("tests") + 1 :]
        if len(below) > 1 and below[0] in SHARED_BROKER_DIRS:
            return f"broker-{below[0]}"
    return None


@pytest.hookimpl(tryfirst=True)  # firstresult: before xdist's own LoadGroupScheduling
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadgroup``, one work unit per broker directory.

    Two workers purging one queue (or truncating one benchmark database) would
    discard each other's messages and rows. xdist's own ``xdist_group`` mark does
    not group on pytest 9 (it renames ``item._nodeid``, which pytest 9 no longer
    reads), so the controller groups by path itself.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class BrokerDirScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return broker_group(nodeid) or super()._split_scope(nodeid)

    return BrokerDirScheduling(config, log)


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
    from weft_django.kernel.clock import process_clock

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
