"""The values a person types: JSON options and the run filter flags.

A bad value is refused before anything is written, with a message naming the option and
the value. JSON is parsed here; the filter flags are only *collected* -- into the mapping
``RunFilter.from_params`` takes, the same one the API's query string gives -- so the CLI,
the API and the admin read a filter one way (``engine.runs.filters``), and this module
parses no filter value itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.core.management.base import CommandParser

from .console import EXIT_USAGE, CliError, shown


def json_option(option: str, text: str | None) -> Any:
    """The JSON value of ``option`` (``None`` when it was not given).

    ``CliError`` ``invalid_json`` names the option, where the parser stopped
    and the value.
    """
    if text is None:
        return None
    try:
        return json.loads(text)
    except RecursionError:  # "[[[[..." deeper than the decoder's stack
        raise CliError(
            "invalid_json",
            f"{option} nests too deeply to be a payload: {shown(text)}",
            EXIT_USAGE,
            option=option,
            value=text[:200],
        ) from None
    except json.JSONDecodeError as exc:
        raise CliError(
            "invalid_json",
            f"{option} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
            f"{shown(text)}",
            EXIT_USAGE,
            option=option,
            value=text,
        ) from None


@dataclass(frozen=True)
class FilterFlag:
    """One filter flag: the option, the key of ``RunFilter.from_params`` it fills,
    whether it repeats, and its help."""

    flag: str
    key: str
    repeat: bool
    metavar: str
    help: str

    @property
    def dest(self) -> str:
        return "filter_" + self.key


#: The run filter flags of ``list`` and of the bulk ``cancel``/``retry``/``resume``.
FILTER_FLAGS: tuple[FilterFlag, ...] = (
    FilterFlag("--status", "status", True, "STATUS", "runs in this status (repeatable: any of)"),
    FilterFlag("--workflow", "workflow", True, "NAME", "runs of this workflow name (repeatable)"),
    FilterFlag("--id", "workflow_id", True, "WORKFLOW_ID", "runs of this workflow id (repeatable)"),
    FilterFlag("--parent", "parent", False, "WORKFLOW_ID", "children of this workflow id"),
    FilterFlag("--created-after", "created_after", False, "ISO8601", "created after this time"),
    FilterFlag("--created-before", "created_before", False, "ISO8601", "created before this time"),
    FilterFlag("--finished-after", "finished_after", False, "ISO8601", "finished after this time"),
    FilterFlag(
        "--finished-before", "finished_before", False, "ISO8601", "finished before this time"
    ),
    FilterFlag(
        "--attr",
        "attr",
        True,
        "NAME=VALUE",
        "runs whose search attribute NAME equals VALUE (NAME>=VALUE, >, <, <= for numbers "
        "and datetimes; repeatable: all of)",
    ),
)


def add_filter_arguments(parser: CommandParser) -> None:
    """The filter flags, in a group of their own in ``--help``."""
    group = parser.add_argument_group("filters (all given must match)")
    for flag in FILTER_FLAGS:
        group.add_argument(
            flag.flag,
            dest=flag.dest,
            action="append" if flag.repeat else "store",
            metavar=flag.metavar,
            help=flag.help,
        )


def filter_params(options: dict[str, Any]) -> dict[str, str | list[str]]:
    """The filter flags given, as ``RunFilter.from_params`` reads them (strings, unparsed)."""
    params: dict[str, str | list[str]] = {}
    for flag in FILTER_FLAGS:
        value = options.get(flag.dest)
        if value is None:
            continue
        params[flag.key] = list(value) if flag.repeat else str(value)
    return params


def positive_int(option: str, value: int | None) -> int | None:
    """``value`` when it is at least 1, else ``CliError`` naming ``option``."""
    if value is not None and value < 1:
        raise CliError(
            "invalid_argument",
            f"{option} must be a positive integer, got {value}",
            EXIT_USAGE,
            option=option,
            value=value,
        )
    return value


__all__ = [
    "FILTER_FLAGS",
    "FilterFlag",
    "add_filter_arguments",
    "filter_params",
    "json_option",
    "positive_int",
]
