"""The turn's shape: one step per command class, unknown classes refused,
timer planning as a pure function, and the import arrows the layering needs
(``turn/`` imports no transport and not ``Engine``; ``context`` not ``replay``)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from weft_django.engine.replay.machine import Leaf
from weft_django.engine.turn import steps, waits
from weft_django.engine.turn.park import plan_timers
from weft_django.engine.workflow.commands import (
    LEAF_COMMANDS,
    LEAF_KINDS,
    Command,
    RunActivity,
    Sleep,
    StartAsyncActivity,
    WaitSignal,
)
from weft_django.models import Timer

PACKAGE = Path(__file__).resolve().parents[2] / "weft_django"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any level (lazy and TYPE_CHECKING too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_every_leaf_command_class_has_exactly_one_step() -> None:
    assert set(steps.STEPS) == set(LEAF_COMMANDS)
    assert {command.kind for command in LEAF_COMMANDS} == LEAF_KINDS
    assert steps.step_for(Sleep(5)) is waits.sleep


def test_an_unrecognized_command_class_raises() -> None:
    @dataclass(frozen=True)
    class Teleport(Command):
        kind: ClassVar[str] = "teleport"

    with pytest.raises(RuntimeError, match=r"unrecognized command .*Teleport"):
        steps.step_for(Teleport())


def test_a_subclass_of_a_command_uses_its_base_step() -> None:
    @dataclass(frozen=True)
    class Nap(Sleep):
        pass

    assert steps.step_for(Nap(1)) is waits.sleep


def test_turn_imports_no_transport_and_not_the_engine() -> None:
    for path in sorted((PACKAGE / "engine" / "turn").glob("*.py")):
        imported = _imports(path)
        assert not {m for m in imported if m.startswith("weft_django.transports")}, path.name
        assert "weft_django.engine.engine" not in imported, path.name
        assert "weft_django.engine.engine.Engine" not in imported, path.name


def test_context_does_not_import_the_replay() -> None:
    imported = _imports(PACKAGE / "engine" / "workflow" / "context.py")
    assert not {m for m in imported if m.startswith("weft_django.engine.replay.machine")}


def _timer(kind: str, position: int | None, fire_at: int, pk: int) -> Timer:
    return Timer(pk=pk, run_id=1, kind=kind, position=position, fire_at=fire_at)


def _planned(plan_writes: list[object]) -> list[tuple[str, int | None, int]]:
    return [
        (w.instance.kind, w.instance.position, w.instance.fire_at)
        for w in plan_writes
        if hasattr(w, "instance")
    ]


def test_plan_timers_inserts_what_open_commands_wait_for() -> None:
    leaves = [
        Leaf(0, Sleep(1000)),
        Leaf(1, WaitSignal("go", timeout_ms=5000)),
        Leaf(2, WaitSignal("no-deadline")),
        Leaf(3, StartAsyncActivity("outside", False, (), timeout_ms=300)),
    ]
    plan = plan_timers(leaves, {}, 10_000, run_id=1, engine_id="e", epoch=3)
    assert _planned(plan.writes) == [
        ("sleep", 0, 11_000),
        ("timeout", 1, 15_000),
        ("timeout", 3, 10_300),
    ]
    assert all(w.instance.epoch == 3 for w in plan.writes)
    assert plan.wake_at == 10_300


def test_plan_timers_keeps_existing_timers_and_deletes_stale_ones() -> None:
    timers = {
        ("sleep", 0): _timer("sleep", 0, 12_345, pk=1),
        ("retry", 1): _timer("retry", 1, 20_000, pk=2),
        ("timeout", 7): _timer("timeout", 7, 1, pk=3),  # no open command: stale
    }
    leaves = [Leaf(0, Sleep(1000)), Leaf(1, RunActivity("act"))]
    plan = plan_timers(leaves, timers, 10_000, run_id=1, engine_id="e", epoch=1, deadline_at=99)
    assert _planned(plan.writes) == []
    [delete] = plan.writes
    assert delete.filters == {"pk__in": [3]}
    assert plan.wake_at == 99  # the run's deadline comes first


def test_plan_timers_with_nothing_to_wait_for() -> None:
    plan = plan_timers([], {}, 10_000, run_id=1, engine_id="e", epoch=1)
    assert plan.writes == [] and plan.wake_at is None
