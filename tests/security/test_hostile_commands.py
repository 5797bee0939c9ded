"""Hostile arguments to every weft management command: a CommandError naming the value.

Invariant protected: each command (``weft`` and its subcommands,
``weft_worker``, ``weft_status``, ``weft_force_release``,
``weft_replay_check``, ``weft_reset_mode``, ``weft_demo``) refuses a bad
value -- NaN, a negative or infinite number, 0 where at least 1 is needed,
an unknown log level, a NUL, 5,000 characters, an id outside the grammar,
broken JSON -- with a ``CommandError`` whose message names the value and a
non-zero exit status, before it starts an engine or writes a row (an engine
that starts anyway fails the test at once instead of running forever).
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

import tests.security.workflows  # noqa: F401  (registers the sec- workflows)
from tests.e2e.helpers import row_counts
from weft_django import client
from weft_django.engine import Engine
from weft_django.models import EngineRecord

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_engine_may_start(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Engine, *args: Any, **kwargs: Any) -> Engine:
        raise AssertionError("a refused command started an engine")

    monkeypatch.setattr(Engine, "start", refuse)


@pytest.fixture
def seeded() -> None:
    client.start("sec-signal", {"n": 1}, workflow_id="hostile-cmd")


CASES = [
    # (command, args, text the message must contain)
    ("weft_worker", ["--grace", "nan"], "nan"),
    ("weft_worker", ["--grace", "-1"], "-1.0"),
    ("weft_worker", ["--grace", "inf"], "inf"),
    ("weft_worker", ["--concurrency", "0"], "got 0"),
    ("weft_worker", ["--concurrency", "-5"], "got -5"),
    ("weft_worker", ["--concurrency", "99999999999"], "99999999999"),
    ("weft_worker", ["--concurrency", "many"], "many"),
    ("weft_worker", ["--log-level", "LOUD"], "LOUD"),
    ("weft_worker", ["--log-level", "\x00"], "\\x00"),
    ("weft_worker", ["--engine-id", ""], "--engine-id"),
    ("weft_worker", ["--engine-id", "e" * 5000], "--engine-id"),
    ("weft_worker", ["--engine-id", "a\x00b"], "a\\x00b"),
    ("weft_demo", ["--sleep", "nan"], "nan"),
    ("weft_demo", ["--sleep", "-3"], "-3.0"),
    ("weft_demo", ["--timeout", "0"], "0.0"),
    ("weft_demo", ["--timeout", "inf"], "inf"),
    ("weft_demo", ["--timeout", "soon"], "soon"),
    ("weft_status", ["--max-lag", "nan"], "--max-lag"),
    ("weft_status", ["--max-lag", "-1"], "--max-lag"),
    ("weft_status", ["--engines", "-1"], "got -1"),
    ("weft_status", ["--engines", str(10**20)], str(10**20)),
    ("weft_status", ["--engines", "x"], "'x'"),
    ("weft_force_release", ["a\x00b"], "a\\x00b"),
    ("weft_force_release", ["w" * 5000], "must match"),
    ("weft_force_release", ["../../etc"], "../../etc"),
    ("weft_force_release", ["hostile-cmd", "--actor", "\x00"], "--actor"),
    ("weft_force_release", ["hostile-cmd", "--actor", ""], "--actor"),
    ("weft_force_release", [], "workflow_id"),
    ("weft_replay_check", ["--limit", "0"], "'0'"),
    ("weft_replay_check", ["--limit", "nan"], "'nan'"),
    ("weft_replay_check", ["--limit", "9" * 5000], "--limit"),
    ("weft_replay_check", ["--workflow", "a\x00b"], "a\\x00b"),
    ("weft_replay_check", ["--workflow", "no-such-workflow"], "no-such-workflow"),
    ("weft_reset_mode", ["--bogus"], "--bogus"),
    ("weft", ["start", "sec-signal", "--input", "{bad"], "{bad"),
    ("weft", ["start", "sec-signal", "--input", "NaN"], "nan"),
    ("weft", ["start", "sec-signal", "--input", "[" * 5000], "--input"),
    ("weft", ["start", "sec-signal", "--id", "a\x00b"], "a\\x00b"),
    ("weft", ["start", "sec-signal", "--idempotency-key", "k\x00"], "k\\x00"),
    ("weft", ["start", "no-such-workflow"], "no-such-workflow"),
    ("weft", ["signal", "hostile-cmd", "\x00", "--payload", "1"], "\\x00"),
    ("weft", ["signal", "hostile-cmd", "go", "--payload", "{"], "{"),
    ("weft", ["signal", "a\x00b", "go"], "a\\x00b"),
    ("weft", ["cancel", "hostile-cmd", "--reason", "r\x00"], "r\\x00"),
    ("weft", ["show", "a\x00b"], "a\\x00b"),
    ("weft", ["result", "hostile-cmd", "--timeout", "nan"], "nan"),
    ("weft", ["list", "--status", "\x00"], "\\x00"),
    ("weft", ["list", "--status", "bogus"], "bogus"),
    ("weft", ["bogus-subcommand"], "bogus-subcommand"),
]


@pytest.mark.parametrize(
    ("command", "args", "named"),
    CASES,
    ids=[f"{c}-{i}-{' '.join(a)[:30]!r}" for i, (c, a, _) in enumerate(CASES)],
)
def test_a_hostile_argument_is_a_command_error_naming_it(
    seeded: None, command: str, args: list[str], named: str
) -> None:
    before = row_counts()
    engines = EngineRecord.objects.count()
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as info:
        call_command(command, *args, stdout=out, stderr=err)
    message = str(info.value)
    assert named.lower() in (message + err.getvalue()).lower(), (message, err.getvalue())
    assert info.value.returncode != 0
    assert row_counts() == before
    assert EngineRecord.objects.count() == engines
