"""The CLI's output contract without a database: the progress bar, the error
mapping (code and exit status) and the confirmation question."""

from __future__ import annotations

import io

from django.core.management.base import OutputWrapper

from weft_django.errors import (
    InvalidRunFilter,
    InvalidTransitionError,
    UnknownWorkflowType,
    WorkflowFailedError,
    WorkflowNotFound,
)
from weft_django.management.cli.console import (
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    CliError,
    Console,
    ProgressBar,
    as_cli_error,
)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_in_a_log_prints_a_line_per_tenth() -> None:
    out = io.StringIO()
    bar = ProgressBar(OutputWrapper(out), "cancel", redraw=False, width=10)
    for done in range(0, 1001, 50):
        bar(done, 1000)
    lines = out.getvalue().splitlines()
    assert lines[0] == "cancel [..........] 0/1000 (0%)"
    assert lines[5] == "cancel [#####.....] 500/1000 (50%)"
    assert lines[-1] == "cancel [##########] 1000/1000 (100%)"
    assert len(lines) == 11
    bar(1000, 1000)  # after the end: nothing more
    assert len(out.getvalue().splitlines()) == 11


def test_progress_bar_on_a_terminal_redraws_in_place() -> None:
    out = Tty()
    bar = ProgressBar(OutputWrapper(out), "retry", redraw=True, width=4)
    bar(1, 4)
    bar(4, 4)
    assert out.getvalue() == "\rretry [#...] 1/4 (25%)\rretry [####] 4/4 (100%)\n"
    empty = io.StringIO()
    ProgressBar(OutputWrapper(empty), "resume", redraw=False, width=4)(0, 0)
    assert empty.getvalue() == "resume [####] 0/0 (100%)\n"


def test_console_progress_is_silent_at_verbosity_zero() -> None:
    err = OutputWrapper(io.StringIO())
    quiet = Console(OutputWrapper(io.StringIO()), err, json_mode=False, verbosity=0)
    assert quiet.progress("cancel") is None
    loud = Console(OutputWrapper(io.StringIO()), err, json_mode=True)
    assert isinstance(loud.progress("cancel"), ProgressBar)


def test_errors_map_to_codes_and_exit_statuses() -> None:
    cases = [
        (UnknownWorkflowType("x"), "unknown_workflow_type", EXIT_USAGE),
        (WorkflowNotFound("x"), "workflow_not_found", EXIT_NOT_FOUND),
        (InvalidTransitionError("x", "completed", "cancel"), "invalid_transition", EXIT_CONFLICT),
        (WorkflowFailedError("x", "failed", {"m": 1}), "workflow_failed", EXIT_FAILED),
        (TimeoutError("still running"), "timeout", EXIT_TIMEOUT),
        (ValueError("bad id"), "invalid_argument", EXIT_USAGE),
        (TypeError("not JSON"), "invalid_argument", EXIT_USAGE),
        (InvalidRunFilter("attr", "colour=red", "unknown"), "invalid_run_filter", EXIT_USAGE),
    ]
    for exc, code, exit_code in cases:
        error = as_cli_error(exc)
        assert error is not None
        assert (error.code, error.exit_code, error.message) == (code, exit_code, str(exc))
    failed = as_cli_error(WorkflowFailedError("x", "failed", {"m": 1}))
    assert failed is not None
    assert failed.as_dict()["error"] == {"m": 1} and failed.as_dict()["status"] == "failed"

    assert as_cli_error(RuntimeError("a bug")) is None
    same = CliError("aborted", "no", EXIT_FAILED)
    assert as_cli_error(same) is same


def test_confirm_reads_a_yes() -> None:
    err = io.StringIO()
    for answer, expected in (("y\n", True), ("YES\n", True), ("\n", False), ("no\n", False)):
        console = Console(
            OutputWrapper(io.StringIO()), OutputWrapper(err), json_mode=False, stdin=Tty(answer)
        )
        assert console.interactive
        assert console.confirm("cancel 3 run(s)?") is expected
    assert err.getvalue().startswith("cancel 3 run(s)? [y/N] ")
    piped = Console(
        OutputWrapper(io.StringIO()), OutputWrapper(err), json_mode=False, stdin=io.StringIO()
    )
    json_at_tty = Console(
        OutputWrapper(io.StringIO()), OutputWrapper(err), json_mode=True, stdin=Tty("")
    )
    assert not piped.interactive and not json_at_tty.interactive
