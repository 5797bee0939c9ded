"""``@activity`` at definition time: what it accepts, its options, the retry delays.

Invariant protected: a mistake in an ``@activity`` -- something that is not
a function, a bad option -- fails when the module is imported, naming the
value, never later inside a turn; and ``backoff_for`` is the documented
formula (exponential, then jitter, then the cap).
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from weft_django.engine.workflow.activity_definition import ActivityDefinition
from weft_django.engine.workflow.definitions import activity, registry


@pytest.fixture(autouse=True)
def _restore_registry() -> Iterator[None]:
    before = dict(registry.activities)
    yield
    with registry.lock:
        registry.activities.clear()
        registry.activities.update(before)


def _define(fn: Any, **options: Any) -> ActivityDefinition:
    decorated = activity(name=f"opts-{id(fn)}", **options)(fn)
    definition = decorated.__weft_activity__
    assert isinstance(definition, ActivityDefinition)
    return definition


# --------------------------------------------------------------------------- what it decorates


def _sync(x: int) -> int:
    return x


async def _async(x: int) -> int:
    return x


def test_a_plain_function_is_sync_and_an_async_def_is_async() -> None:
    assert _define(_sync).is_async is False
    assert _define(_async).is_async is True


def test_partials_and_wrapped_functions_are_judged_by_the_function_inside() -> None:
    assert _define(functools.partial(_async, 1)).is_async is True
    assert _define(functools.partial(_sync, 1)).is_async is False

    def logged(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        return wrapper

    assert _define(logged(_async)).is_async is True
    assert _define(logged(_sync)).is_async is False


def test_a_callable_object_counts_by_its_call_method() -> None:
    class AsyncCallable:
        async def __call__(self) -> int:
            return 1

    class SyncCallable:
        def __call__(self) -> int:
            return 1

    assert _define(AsyncCallable()).is_async is True
    assert _define(SyncCallable()).is_async is False


def test_the_default_name_of_a_partial_is_the_inner_functions() -> None:
    decorated = activity()(functools.partial(_sync, 2))
    assert decorated.__weft_activity__.name == f"{__name__}._sync"


def _gen() -> Iterator[int]:
    yield 1


async def _agen() -> Any:
    yield 1


class _NotAFunction:
    pass


@pytest.mark.parametrize(
    "target",
    [42, "send_email", None, _NotAFunction, _gen, _agen, functools.partial(_gen)],
    ids=["int", "str", "None", "class", "generator", "async-generator", "partial-generator"],
)
def test_anything_but_a_function_is_refused_naming_it(target: Any) -> None:
    with pytest.raises(TypeError, match="@activity needs a function or an async def function") as e:
        activity(name="opts-bad")(target)
    assert repr(target)[:40] in str(e.value)
    assert "opts-bad" not in registry.activities


# --------------------------------------------------------------------------- options


def test_options_land_on_the_definition_in_milliseconds() -> None:
    definition = _define(
        _sync,
        backoff=2,
        heartbeat_timeout=timedelta(seconds=1.5),
        max_backoff=timedelta(minutes=1),
        jitter=0.25,
    )
    assert definition.heartbeat_timeout_ms == 1500
    assert definition.max_backoff_ms == 60_000
    assert definition.jitter == 0.25
    plain = _define(_sync)
    assert (plain.heartbeat_timeout_ms, plain.max_backoff_ms, plain.jitter) == (None, None, 0.0)


@pytest.mark.parametrize("value", [0, -1, math.inf, -math.inf, math.nan, timedelta(0)], ids=repr)
def test_heartbeat_timeout_must_be_positive_and_finite(value: Any) -> None:
    with pytest.raises(ValueError, match="activity heartbeat_timeout") as e:
        activity(name="opts-hb", heartbeat_timeout=value)
    assert repr(value) in str(e.value)


def test_heartbeat_timeout_refuses_a_non_duration() -> None:
    with pytest.raises(TypeError, match=r"activity heartbeat_timeout.*'soon'"):
        activity(name="opts-hb", heartbeat_timeout="soon")


@pytest.mark.parametrize("value", [-1, math.inf, math.nan], ids=repr)
def test_max_backoff_must_be_a_finite_duration(value: float) -> None:
    with pytest.raises(ValueError, match="activity max_backoff"):
        activity(name="opts-mb", max_backoff=value)


def test_max_backoff_below_backoff_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match=r"at least backoff \(5000 ms\), got 2 \(2000 ms\)"):
        activity(name="opts-mb", backoff=5, max_backoff=2)
    assert _define(_sync, backoff=5, max_backoff=5).max_backoff_ms == 5000


@pytest.mark.parametrize("value", [-0.1, 1.5, math.nan, math.inf, True, "0.1", None], ids=repr)
def test_jitter_must_be_a_fraction(value: Any) -> None:
    with pytest.raises(ValueError, match="activity jitter") as e:
        activity(name="opts-j", jitter=value)
    assert repr(value) in str(e.value)


def test_jitter_accepts_both_ends() -> None:
    assert _define(_sync, jitter=0).jitter == 0.0
    assert _define(_sync, jitter=1).jitter == 1.0


# --------------------------------------------------------------------------- backoff_for


def test_backoff_doubles_from_the_second_attempt() -> None:
    definition = _define(_sync, backoff=1)
    assert [definition.backoff_for(n) for n in (2, 3, 4, 5)] == [1000, 2000, 4000, 8000]


def test_max_backoff_caps_every_delay() -> None:
    definition = _define(_sync, backoff=1, max_backoff=5)
    assert [definition.backoff_for(n) for n in (2, 3, 4, 5, 6, 60)] == [
        1000,
        2000,
        4000,
        5000,
        5000,
        5000,
    ]


class _Fixed:
    """A ``uniform`` that returns the low end, the high end or the midpoint."""

    def __init__(self, where: float) -> None:
        self.where = where
        self.calls: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.calls.append((a, b))
        return a + (b - a) * self.where


def test_jitter_draws_from_the_documented_interval() -> None:
    definition = _define(_sync, backoff=1, jitter=0.2)
    low, high = _Fixed(0.0), _Fixed(1.0)
    assert definition.backoff_for(3, rng=low) == 1600
    assert definition.backoff_for(3, rng=high) == 2400
    assert low.calls == [(1600.0, 2400.0)]


def test_jitter_is_applied_before_the_cap() -> None:
    definition = _define(_sync, backoff=1, max_backoff=2.2, jitter=0.5)
    assert definition.backoff_for(3, rng=_Fixed(1.0)) == 2200  # 3000 drawn, capped
    assert definition.backoff_for(3, rng=_Fixed(0.0)) == 1000  # 1000 drawn, under the cap


def test_jitter_spreads_real_draws_within_bounds() -> None:
    definition = _define(_sync, backoff=1, jitter=0.5)
    rng = random.Random(7)
    delays = {definition.backoff_for(2, rng=rng) for _ in range(200)}
    assert all(500 <= d <= 1500 for d in delays)
    assert len(delays) > 50  # really spread, not a constant


def test_a_huge_attempt_number_does_not_overflow_the_jitter() -> None:
    definition = _define(_sync, backoff=1, max_backoff=60, jitter=0.1)
    assert definition.backoff_for(10_000, rng=random.Random(1)) == 60_000
