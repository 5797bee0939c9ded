"""The suite's xdist grouping: each broker-sharing directory is one work unit.

Why: tests in tests/celery, tests/chaos and tests/bench purge one broker queue or
truncate one benchmark database; two xdist workers running them side by side
discard each other's messages and rows (CI saw runs vanish mid-benchmark).
"""

from __future__ import annotations

import pytest

from tests.conftest import SHARED_BROKER_DIRS, broker_group


@pytest.mark.parametrize("directory", SHARED_BROKER_DIRS)
def test_every_test_of_a_broker_directory_is_in_its_one_group(directory: str) -> None:
    ids = [
        f"tests/{directory}/test_a.py::test_one",
        f"tests/{directory}/test_b.py::TestX::test_two[redis]",
        f"tests/{directory}/sub/test_c.py::test_three@other",
    ]
    assert {broker_group(nodeid) for nodeid in ids} == {f"broker-{directory}"}


@pytest.mark.parametrize(
    "nodeid",
    [
        "tests/engines/test_queues.py::test_rate",
        "tests/unit/test_celery_names.py::test_x",  # a file named after a broker dir
        "tests/celery.py::test_odd",  # not a directory
        "other/celery/test_a.py::test_one",  # not under tests/
    ],
)
def test_other_tests_are_not_grouped(nodeid: str) -> None:
    assert broker_group(nodeid) is None


def test_the_scheduler_groups_by_directory_and_leaves_the_rest_per_test() -> None:
    """The controller's scheduler, made as xdist makes it under --dist loadgroup."""
    from xdist.scheduler import LoadGroupScheduling

    from tests.conftest import pytest_xdist_make_scheduler

    class Config:
        def getvalue(self, name: str) -> object:
            return {"dist": "loadgroup", "tx": ["popen"] * 2, "numprocesses": 2}.get(name)

        option = type("Option", (), {"numprocesses": 2, "maxschedchunk": None})()

    sched = pytest_xdist_make_scheduler(Config(), None)  # type: ignore[arg-type]
    assert isinstance(sched, LoadGroupScheduling)
    assert sched._split_scope("tests/celery/test_a.py::t") == "broker-celery"
    assert sched._split_scope("tests/e2e/test_a.py::t") == "tests/e2e/test_a.py::t"
    assert sched._split_scope("tests/e2e/test_a.py::t@mine") == "mine"
