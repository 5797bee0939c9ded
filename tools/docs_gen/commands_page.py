"""The commands page: the management commands weft-django provides, with their options."""

from __future__ import annotations

import sys

from .markdown import cell, md, page, table


def weft_command_names() -> list[str]:
    """The management commands weft-django provides."""
    from django.core.management import get_commands

    return sorted(name for name, app in get_commands().items() if app == "weft_django")


def render_commands() -> str:
    from django.core.management import BaseCommand, load_command_class

    base_dests = {a.dest for a in BaseCommand().create_parser("manage.py", "base")._actions}
    sections = []
    for name in weft_command_names():
        command = load_command_class("weft_django", name)
        parser = command.create_parser("manage.py", name)
        actions = [a for a in parser._actions if a.dest not in base_dests]
        usage = [f"python manage.py {name}"]
        rows = []
        for action in actions:
            if action.option_strings:
                flag = action.option_strings[0]
                is_flag = action.nargs == 0
                usage.append(f"[{flag}]" if is_flag else f"[{flag} {action.dest.upper()}]")
                arg = ", ".join(f"`{o}`" for o in action.option_strings)
                default = "" if is_flag or action.default is None else f"`{action.default}`"
            else:
                usage.append(action.dest)
                arg, default = f"`{action.dest}`", "(required)"
            rows.append((arg, default, action.help or ""))
        module_doc = md(sys.modules[type(command).__module__].__doc__)
        body = module_doc.split("\n", 1)[1].strip() if "\n" in module_doc else ""
        lines = [
            f"## {name}\n",
            f"{cell(command.help)}\n",
            f"```\n{' '.join(usage)}\n```\n",
        ]
        if rows:
            lines.append(table(("argument", "default", "meaning"), rows))
        if body:
            lines.append(body + "\n")
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
