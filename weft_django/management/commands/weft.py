"""``manage.py weft SUBCOMMAND``: start, signal, list, show, cancel, retry, resume, fork,
reset, result, history.

Operate workflows from a shell or a script, through the same client the
application uses. Each subcommand takes `--json` and then
prints exactly one JSON document on stdout -- the answer, or
`{"error": {"code": ..., "message": ..., ...}}` -- so a script never parses
prose. Exit statuses: 0 done; 1 the run ended otherwise (`result` of a
failed, cancelled or timed-out run) or a confirmation was declined; 2 bad
input (an invalid `--input`/`--payload` JSON, an unknown workflow name, a
bad filter value, a filter that matches everything without `--all`,
a usage error) and nothing was written; 3 no such workflow id; 4 the run's
status does not allow the action; 5 `result --timeout` ran out.
`cancel`, `retry` and `resume` take one workflow id, or filter flags
(`--status`, `--workflow`, `--id`, `--parent`, `--created-after`, ...,
`--attr NAME=VALUE`) to act on every matching run, with `--dry-run`,
`--all` and a progress bar on stderr. See docs/howto/cli.md.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from weft_django.management.cli.actions import CANCEL, RESUME, RETRY
from weft_django.management.cli.console import EXIT_USAGE, CliError, Console, as_cli_error
from weft_django.management.cli.history import HISTORY
from weft_django.management.cli.listing import LIST
from weft_django.management.cli.payloads import BLOBS, REENCRYPT
from weft_django.management.cli.repair import FORK, RESET
from weft_django.management.cli.result import RESULT
from weft_django.management.cli.show import SHOW
from weft_django.management.cli.signal import SIGNAL
from weft_django.management.cli.start import START

#: The subcommands, in the order ``--help`` lists them.
SUBCOMMANDS = (
    START,
    SIGNAL,
    LIST,
    SHOW,
    CANCEL,
    RETRY,
    RESUME,
    FORK,
    RESET,
    RESULT,
    HISTORY,
    REENCRYPT,
    BLOBS,
)


class Command(BaseCommand):
    help = (
        "Start, signal, list, show, cancel, retry, resume, fork, reset workflows, read results "
        "and export histories."
    )

    _json_argv = False

    def add_arguments(self, parser: CommandParser) -> None:
        base = [a for a in parser._actions if a.option_strings and a.dest != "help"]
        subparsers = parser.add_subparsers(
            dest="subcommand", required=True, metavar="SUBCOMMAND", title="subcommands"
        )
        for sub in SUBCOMMANDS:
            subparser = subparsers.add_parser(
                sub.name,
                help=sub.help,
                description=inspect.cleandoc(sub.description).replace("``", "`"),
                formatter_class=argparse.RawDescriptionHelpFormatter,
            )
            sub.add_arguments(subparser)
            subparser.add_argument(
                "--json", action="store_true", help="print one JSON document (errors too)"
            )
            # Django's own options (--verbosity, --settings, ...) after the
            # subcommand as well; SUPPRESS keeps a value given before it.
            for action in base:
                twin = copy.copy(action)
                twin.default = argparse.SUPPRESS
                subparser._add_action(twin)

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        if self._json_argv:
            # A usage error under --json raises (run_from_argv prints it as JSON).
            parser.called_from_command_line = False
            for action in parser._subparsers._group_actions if parser._subparsers else ():
                for subparser in getattr(action, "choices", {}).values():
                    subparser.called_from_command_line = False
        return parser

    def run_from_argv(self, argv: list[str]) -> None:
        try:
            self._run_from_argv(argv)
        except BrokenPipeError:
            _quiet_closed_pipe()

    def _run_from_argv(self, argv: list[str]) -> None:
        self._json_argv = "--json" in argv[2:]
        try:
            super().run_from_argv(argv)
            sys.stdout.flush()  # a reader gone (``| head``) surfaces here, not at exit
        except CommandError as exc:
            # Only a usage error under --json gets here: execute()'s own errors
            # are printed and turned into the exit status inside run_from_argv
            # (which re-raises them under --traceback: let those through).
            if "--traceback" in argv:
                raise
            message = str(exc).removeprefix("Error: ")
            error = CliError("usage", message, EXIT_USAGE)
            self.stdout.write(json.dumps({"error": error.as_dict()}, indent=2, sort_keys=True))
            self.stderr.write(f"CommandError: {message}")
            sys.exit(EXIT_USAGE)

    def handle(self, *args: Any, **options: Any) -> None:
        sub = {s.name: s for s in SUBCOMMANDS}[options["subcommand"]]
        console = Console(
            self.stdout,
            self.stderr,
            json_mode=bool(options["json"]),
            verbosity=int(options.get("verbosity", 1)),
        )
        try:
            sub.run(options, console)
        except Exception as exc:
            error = as_cli_error(exc)
            if error is None:
                raise
            console.emit_error(error)
            raise CommandError(error.message, returncode=error.exit_code) from exc


def _quiet_closed_pipe() -> None:
    """The reader of stdout went away (``weft list | head -n 1``): what it read is
    all it wanted, so exit 0 quietly -- stdout pointed at ``/dev/null`` so the
    interpreter's last flush at exit does not print a second ``BrokenPipeError``."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)
