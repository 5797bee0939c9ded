"""The commands page: the management commands weft-django provides, with their options."""

from __future__ import annotations

import argparse
import sys

from .markdown import cell, md, page, table


def weft_command_names() -> list[str]:
    """The management commands weft-django provides."""
    from django.core.management import get_commands

    return sorted(name for name, app in get_commands().items() if app == "weft_django")


def _arguments(
    parser: argparse.ArgumentParser, skip: set[str], *, metavars: bool
) -> tuple[list[str], list[tuple[str, str, str]]]:
    """The usage words and the table rows of ``parser``'s own arguments.

    ``metavars``: name a value by its metavar (``--input JSON``) rather than
    its dest in capitals (the subcommands of ``weft``)."""
    usage: list[str] = []
    rows = []
    for action in parser._actions:
        if action.dest in skip or isinstance(action, argparse._SubParsersAction):
            continue
        value = (metavars and action.metavar) or action.dest.upper()
        if action.option_strings:
            flag = action.option_strings[0]
            is_flag = action.nargs == 0
            usage.append(f"[{flag}]" if is_flag else f"[{flag} {value}]")
            arg = ", ".join(f"`{o}`" for o in action.option_strings)
            default = "" if is_flag or action.default is None else f"`{action.default}`"
        else:
            name = str(action.metavar) if metavars and action.metavar else action.dest
            usage.append(f"[{name}]" if action.nargs == "?" else name)
            arg = f"`{name}`"
            default = "(optional)" if action.nargs == "?" else "(required)"
        rows.append((arg, default, action.help or ""))
    return usage, rows


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """``{name: (help, subparser)}`` of a command with subcommands (``weft``)."""
    found: dict[str, tuple[str, argparse.ArgumentParser]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, subparser in action.choices.items():
                found[name] = (helps.get(name, ""), subparser)
    return found


def _body(doc: str | None) -> str:
    text = md(doc)
    return text.split("\n", 1)[1].strip() if "\n" in text else ""


def render_commands() -> str:
    from django.core.management import BaseCommand, load_command_class

    base_dests = {a.dest for a in BaseCommand().create_parser("manage.py", "base")._actions}
    sections = []
    for name in weft_command_names():
        command = load_command_class("weft_django", name)
        parser = command.create_parser("manage.py", name)
        usage, rows = _arguments(parser, base_dests, metavars=False)
        subcommands = _subcommands(parser)
        if subcommands:
            usage.append("SUBCOMMAND ...")
        body = _body(sys.modules[type(command).__module__].__doc__)
        lines = [
            f"## {name}\n",
            f"{cell(command.help)}\n",
            f"```\n{' '.join([f'python manage.py {name}', *usage])}\n```\n",
        ]
        if rows:
            lines.append(table(("argument", "default", "meaning"), rows))
        if body:
            lines.append(body + "\n")
        for sub_name, (sub_help, subparser) in subcommands.items():
            sub_usage, sub_rows = _arguments(subparser, base_dests, metavars=True)
            lines += [
                f"### {name} {sub_name}\n",
                f"{cell(sub_help)}\n",
                f"```\n{' '.join([f'python manage.py {name} {sub_name}', *sub_usage])}\n```\n",
                table(("argument", "default", "meaning"), sub_rows),
            ]
            sub_body = _body(subparser.description)
            if sub_body:
                lines.append(sub_body + "\n")
        sections.append("\n".join(lines))
    return page(
        "Management commands reference",
        """
        weft-django adds these `manage.py` commands (Django's common options —
        `--settings`, `--verbosity`, `--traceback`, … — are accepted by each and
        not repeated here).
        """,
        *sections,
    )
