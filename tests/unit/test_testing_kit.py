"""weft_django.testing: one clock, and a kit that imports without pytest."""

from __future__ import annotations

import math
import subprocess
import textwrap
from datetime import timedelta

import pytest

from tests.support import ManualClock, child_env, python
from weft_django.testing import FakeClock


def test_fake_clock_moves_only_when_told() -> None:
    clock = FakeClock(start_ms=10_000)
    assert clock() == clock.now == 10_000
    assert clock.advance(1.5) == 11_500  # seconds
    assert clock.advance(timedelta(milliseconds=250)) == 11_750
    assert clock.advance_ms(-750) == 11_000  # integer ms, either way
    assert clock.set_ms(5) == 5 == clock()


@pytest.mark.parametrize("bad", [math.inf, math.nan, -1.0])
def test_fake_clock_advance_takes_durations_through_the_one_parser(bad: float) -> None:
    with pytest.raises(ValueError, match=r"FakeClock\.advance duration"):
        FakeClock().advance(bad)


def test_the_suites_manual_clock_is_the_fake_clock_in_ms() -> None:
    clock = ManualClock()
    assert isinstance(clock, FakeClock)
    assert clock() == 1_000_000
    assert clock.advance(5) == 1_000_005  # ms, as the suite has always meant


def test_the_kit_imports_without_pytest() -> None:
    """A unittest project has no pytest: ``WeftTestMixin`` must import anyway (the fixture
    lives in ``weft_django.testing.pytest_plugin``, the only module importing pytest)."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["pytest"] = None  # any "import pytest" now raises ImportError
        import django
        django.setup()
        from weft_django.testing import FakeClock, WeftTestMixin, WorkflowTestEnvironment
        try:
            from weft_django.testing import weft_env
        except ImportError:
            print("fixture needs pytest")
        print("ok", FakeClock()())
        """
    )
    done = subprocess.run(
        [python(), "-c", script],
        env=child_env(DJANGO_SETTINGS_MODULE="project.settings"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fixture", "needs", "pytest", "ok", "1700000000000"]


@pytest.mark.django_db(transaction=True)
def test_the_fixture_module_is_loaded_by_naming_the_package(weft_env) -> None:
    """``pytest_plugins = ["weft_django.testing"]`` (README) still provides ``weft_env``."""
    assert isinstance(weft_env.clock, FakeClock)
