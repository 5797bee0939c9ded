"""weft_django.testing: one clock, and a kit that imports without pytest."""

from __future__ import annotations

import importlib
import math
import sys
from datetime import timedelta

import pytest

from tests.support import ManualClock
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


def test_the_kit_imports_without_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """A unittest project has no pytest: ``WeftTestMixin`` must import anyway (the fixture
    lives in ``weft_django.testing.pytest_plugin``, the only module importing pytest).

    In-process, no child: with ``sys.modules["pytest"] = None`` every ``import pytest``
    raises ImportError, and the kit's modules are imported afresh (monkeypatch puts the
    originals back afterwards)."""
    import weft_django
    import weft_django.testing

    monkeypatch.setattr(weft_django, "testing", weft_django.testing)  # re-bound by the import
    for name in [m for m in sys.modules if m.startswith("weft_django.testing")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pytest", None)
    kit = importlib.import_module("weft_django.testing")
    assert kit.FakeClock()() == 1_700_000_000_000
    assert kit.WeftTestMixin and kit.WorkflowTestEnvironment
    assert not hasattr(kit, "weft_env")  # the fixture lives in pytest_plugin alone


@pytest.mark.django_db(transaction=True)
def test_the_fixture_module_is_loaded_by_naming_the_package(weft_env) -> None:
    """``pytest_plugins = ["weft_django.testing"]`` (README) still provides ``weft_env``."""
    assert isinstance(weft_env.clock, FakeClock)
