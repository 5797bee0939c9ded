"""The filter form of ``weft cancel|retry|resume``: every run a filter matches.

Why the guards: one command can change thousands of runs. A filter that
matches everything is refused unless ``--all`` says so; ``--dry-run``
prints how many runs match and changes nothing; a person at a terminal is
asked to confirm the count first (``--yes`` skips the question; a script --
no terminal, or ``--json`` -- is not asked: its filter and ``--all`` are its
confirmation). The work itself is ``client.cancel_many`` / ``retry_many`` /
``resume_many`` (``engine.run_filters`` parses the filter, the client acts
in chunks and reports each chunk to the progress bar drawn on stderr);
this module only wires the flags to them.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from weft_django.engine import client

from .console import EXIT_FAILED, EXIT_USAGE, CliError, Console

#: The flags only the filter form takes.
BULK_FLAGS = ("all", "dry_run", "yes")


def add_arguments(parser: CommandParser) -> None:
    group = parser.add_argument_group("the filter form")
    group.add_argument(
        "--all",
        dest="all",
        action="store_true",
        help="act on every run when no filter narrows it (required then)",
    )
    group.add_argument(
        "--dry-run",
        action="store_true",
        help="print how many runs the filter matches; change nothing",
    )
    group.add_argument(
        "--yes", action="store_true", help="do not ask for confirmation at a terminal"
    )


def refuse_bulk_flags(options: dict[str, Any]) -> None:
    """The one-run form takes none of ``BULK_FLAGS``: say so rather than ignore it."""
    given = [f"--{name.replace('_', '-')}" for name in BULK_FLAGS if options.get(name)]
    if given:
        raise CliError(
            "invalid_argument",
            f"only the filter form (filter flags instead of a WORKFLOW_ID) takes "
            f"{', '.join(given)}; got the workflow id {options['workflow_id']!r}",
            EXIT_USAGE,
        )


def run(action: str, params: dict[str, Any], options: dict[str, Any], console: Console) -> None:
    from weft_django.engine.run_filters import RunFilter

    run_filter = RunFilter.from_params(params)  # InvalidRunFilter names the bad key and value
    allow_all: bool = options["all"]
    if run_filter.is_empty() and not allow_all:
        raise CliError(
            "filter_matches_everything",
            f"no filter given: {action} would act on every run; give filter flags "
            f"(--status, --workflow, ...) or add --all to mean every run",
            EXIT_USAGE,
        )
    many = getattr(client, f"{action}_many")  # cancel_many, retry_many, resume_many
    extra: dict[str, Any] = {"reason": options["reason"] or ""} if action == "cancel" else {}
    if options["dry_run"]:
        _report(many(run_filter, dry_run=True, allow_all=allow_all, **extra), console)
        return
    if console.interactive and not options["yes"]:
        preview = many(run_filter, dry_run=True, allow_all=allow_all, **extra)
        if not console.confirm(f"{action} the {preview.matched} run(s) this filter matches?"):
            raise CliError(
                "aborted", f"{action} not confirmed: nothing changed", EXIT_FAILED, action=action
            )
    result = many(
        run_filter,
        allow_all=allow_all,
        progress=console.progress(action),
        **extra,
    )
    _report(result, console)


def _report(result: Any, console: Console) -> None:
    body = {
        "action": result.action,
        "matched": result.matched,
        "changed": result.changed,
        "skipped": result.skipped,
        "dry_run": result.dry_run,
    }
    if result.dry_run:
        text = f"{result.action} (dry run): {result.matched} run(s) match; nothing changed"
    else:
        text = (
            f"{result.action}: {result.matched} run(s) matched, {result.changed} changed, "
            f"{result.skipped} skipped"
        )
    console.emit(body, text)
