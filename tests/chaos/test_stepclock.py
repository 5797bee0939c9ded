"""The chaos engines' steppable clock (``devtools.chaos.stepclock``): the offset the
injector writes is what an engine built afterwards reads, and an explicit clock
still wins (a test's fake clock is never replaced)."""

from __future__ import annotations

import pytest

from devtools.chaos import stepclock
from weft_django.engine import Engine
from weft_django.kernel.clock import wall_ms


@pytest.fixture
def restore_engine_init():
    original = Engine.__init__
    yield
    Engine.__init__ = original  # type: ignore[method-assign]


def test_file_offset_clock_follows_the_file(tmp_path):
    path = tmp_path / "e1.offset"
    clock = stepclock.FileOffsetClock(path)
    assert abs(clock() - wall_ms()) < 1_000  # no file: the wall clock
    stepclock.write_offset(path, 2_500)
    assert 2_000 < clock() - wall_ms() <= 2_500
    stepclock.write_offset(path, -2_500)
    assert -3_000 < clock() - wall_ms() <= -2_400
    stepclock.write_offset(path, 0)
    assert abs(clock() - wall_ms()) < 1_000


def test_install_gives_engines_the_file_clock_unless_one_is_passed(
    tmp_path, monkeypatch, restore_engine_init
):
    path = tmp_path / "e1.offset"
    stepclock.write_offset(path, 60_000)
    monkeypatch.setenv(stepclock.CLOCK_FILE_ENV, str(path))
    assert stepclock.install()
    engine = Engine(engine_id="stepped")
    assert engine.uses_injected_clock
    assert 59_000 < engine.now_ms() - wall_ms() <= 60_000
    fixed = Engine(engine_id="fixed", clock=lambda: 42)
    assert fixed.now_ms() == 42
    positional = Engine("positional", lambda: 7)
    assert positional.now_ms() == 7


def test_install_without_the_variable_changes_nothing(monkeypatch, restore_engine_init):
    monkeypatch.delenv(stepclock.CLOCK_FILE_ENV, raising=False)
    before = Engine.__init__
    assert not stepclock.install()
    assert Engine.__init__ is before
