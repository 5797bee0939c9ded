"""The retry policy of an attempt its engine's death cut short."""

from __future__ import annotations

import dataclasses

from weft_django.engine.activities.started import interrupted_policy
from weft_django.engine.workflow.definitions import activity, get_activity


@activity(name="unit.interrupted.plain")
def plain() -> None: ...


@activity(name="unit.interrupted.retried", retries=2)
def retried() -> None: ...


def test_declared_retries_are_obeyed() -> None:
    definition = get_activity("unit.interrupted.retried")
    assert interrupted_policy(definition, 5) is definition


def test_an_activity_without_retries_survives_max_recovery_attempts_deaths() -> None:
    definition = get_activity("unit.interrupted.plain")
    assert definition.retries == 0
    policy = interrupted_policy(definition, 5)
    assert policy.retries == 4  # five attempts in all, then ActivityError
    assert dataclasses.replace(policy, retries=0) == definition  # nothing else changes
    assert interrupted_policy(definition, 1).retries == 0
