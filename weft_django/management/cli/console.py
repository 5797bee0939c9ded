"""What ``manage.py weft`` prints, and how it fails: text or one JSON document.

The contract every subcommand keeps: it fails the same way -- a stable error ``code``, a
message naming the value that explains it, and an exit status a script can branch on --
and with ``--json`` prints exactly one JSON document on stdout, success or not. The
subcommands return nothing and raise; this module maps what they raise (``CliError``, the
``WeftError`` catalogue, a ``TimeoutError``, the client's ``ValueError``/``TypeError`` for
a bad argument) to that contract. Human notes and the progress bar go to stderr,
so stdout stays what a script reads.

Exit statuses (``EXIT_*``): 0 done; 1 the run ended otherwise (``result`` of a
failed, cancelled or timed-out run), or an operator declined; 2 bad input
(nothing was written); 3 no such workflow id; 4 the run's state does not
allow it (e.g. cancelling a finished run); 5 still not finished when
``result --timeout`` ran out.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, TextIO

from django.core.management.base import CommandParser, OutputWrapper

from weft_django.errors import WeftError, WorkflowFailedError

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_NOT_FOUND: Final = 3
EXIT_CONFLICT: Final = 4
EXIT_TIMEOUT: Final = 5

#: A ``WeftError``'s HTTP status (its class's contract) to the exit status.
_EXIT_BY_HTTP_STATUS: Final = {
    400: EXIT_USAGE,
    404: EXIT_NOT_FOUND,
    409: EXIT_CONFLICT,
    422: EXIT_CONFLICT,
}

#: How many characters of an offending value an error message repeats.
VALUE_LIMIT: Final = 200


class CliError(Exception):
    """An error of the CLI itself: ``code`` (stable), a message naming the value,
    the exit status, and the fields a script may read."""

    def __init__(self, code: str, message: str, exit_code: int = EXIT_USAGE, **fields: Any):
        super().__init__(message)
        self.code = code
        self.message = message
        self.exit_code = exit_code
        self.fields = fields

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.fields}


def shown(value: str) -> str:
    """``value`` quoted for an error message, cut at ``VALUE_LIMIT`` characters."""
    text = value if len(value) <= VALUE_LIMIT else value[: VALUE_LIMIT - 1] + "…"
    return repr(text)


def as_cli_error(exc: BaseException) -> CliError | None:
    """``exc`` as the CLI reports it, or ``None`` for a bug (let it raise)."""
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, WeftError):
        body = exc.as_dict()
        code, message = body.pop("code"), body.pop("message")
        if isinstance(exc, WorkflowFailedError):
            exit_code = EXIT_FAILED
        else:
            exit_code = _EXIT_BY_HTTP_STATUS.get(exc.http_status, EXIT_FAILED)
        return CliError(code, message, exit_code, **body)
    if isinstance(exc, TimeoutError):
        return CliError("timeout", str(exc), EXIT_TIMEOUT)
    if isinstance(exc, (ValueError, TypeError)):
        # The client refuses a bad argument (a workflow id, a signal name, a
        # limit) before it writes anything. (A bad filter is a WeftError:
        # InvalidRunFilter, code invalid_run_filter, exit 2.)
        return CliError("invalid_argument", str(exc), EXIT_USAGE)
    return None


class Console:
    """Where a subcommand's output goes (``json`` or text) and how it talks to a person."""

    def __init__(
        self,
        stdout: OutputWrapper,
        stderr: OutputWrapper,
        *,
        json_mode: bool,
        verbosity: int = 1,
        stdin: TextIO | None = None,
    ) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.json_mode = json_mode
        self.verbosity = verbosity
        self.stdin = stdin if stdin is not None else sys.stdin

    def emit(self, data: Any, text: str | Iterable[str]) -> None:
        """``data`` as one JSON document, or ``text`` (a line or lines) on stdout."""
        if self.json_mode:
            self.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str))
            return
        for line in [text] if isinstance(text, str) else text:
            self.stdout.write(line)

    def emit_error(self, error: CliError) -> None:
        """The error as the JSON document (``--json``); text mode: Django prints it."""
        if self.json_mode:
            body = {"error": error.as_dict()}
            self.stdout.write(json.dumps(body, indent=2, sort_keys=True, default=str))

    def note(self, message: str) -> None:
        """A sentence for a person, on stderr (silent at ``--verbosity 0``)."""
        if self.verbosity > 0:
            self.stderr.write(message)

    @property
    def interactive(self) -> bool:
        """A person at a terminal who can answer a question (never with ``--json``)."""
        isatty = getattr(self.stdin, "isatty", None)
        return not self.json_mode and callable(isatty) and bool(isatty())

    def confirm(self, question: str) -> bool:
        """Ask ``question [y/N]`` on stderr; only ``y``/``yes`` is a yes."""
        self.stderr.write(f"{question} [y/N] ", ending="")
        self.stderr.flush()
        answer = self.stdin.readline()
        return answer.strip().lower() in ("y", "yes")

    def progress(self, label: str) -> Callable[[int, int], None] | None:
        """A ``progress(done, total)`` callback drawing a bar on stderr, or ``None``
        at ``--verbosity 0``. On a terminal the bar redraws in place; elsewhere
        (a log) it prints a line at each tenth, so a million runs stay a few lines."""
        if self.verbosity == 0:
            return None
        return ProgressBar(self.stderr, label, redraw=_isatty(self.stderr))


@dataclass
class ProgressBar:
    """``label [#########...........] 450/1000 (45%)`` on ``out``."""

    out: OutputWrapper
    label: str
    redraw: bool
    width: int = 30
    _last_tenth: int = -1
    _ended: bool = False

    def __call__(self, done: int, total: int) -> None:
        if self._ended:
            return
        total = max(total, 0)
        done = min(max(done, 0), total) if total else done
        fraction = done / total if total else 1.0
        filled = round(self.width * fraction)
        line = (
            f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] "
            f"{done}/{total} ({fraction:.0%})"
        )
        finished = total == 0 or done >= total
        if self.redraw:
            self.out.write("\r" + line, ending="\n" if finished else "")
            self.out.flush()
        else:
            tenth = int(fraction * 10)
            if tenth != self._last_tenth or finished:
                self.out.write(line)
            self._last_tenth = tenth
        self._ended = finished


def _isatty(out: OutputWrapper) -> bool:
    isatty = getattr(out, "isatty", None)
    return callable(isatty) and bool(isatty())


@dataclass(frozen=True)
class Subcommand:
    """One ``manage.py weft`` subcommand: its name, one line of help, a longer
    description, its arguments and what it does (it writes through ``console``
    and raises to fail)."""

    name: str
    help: str
    description: str
    add_arguments: Callable[[CommandParser], None]
    run: Callable[[dict[str, Any], Console], None]


__all__ = [
    "EXIT_CONFLICT",
    "EXIT_FAILED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "CliError",
    "Console",
    "ProgressBar",
    "Subcommand",
    "as_cli_error",
    "shown",
]
