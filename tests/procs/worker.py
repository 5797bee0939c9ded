"""``python -m tests.procs.worker MODULES COMMAND [ARGS ...]``: a management
command (``weft_worker``) run after importing extra workflow modules.

Why: weft autodiscovers ``workflows.py`` of installed apps only, and the
workflows of a test package (``devtools.chaos.workflows``) are not an app's. A
Celery node loads such modules with ``-I``; this is the same for the
standalone engine, with no test hook in the project's settings. ``MODULES``
is a comma-separated list of dotted module names.
"""

from __future__ import annotations

import importlib
import os
import sys


def main(argv: list[str]) -> None:
    modules, *command = argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    for name in filter(None, modules.split(",")):
        importlib.import_module(name)
    from django.core.management import execute_from_command_line

    execute_from_command_line(["manage.py", *command])


if __name__ == "__main__":
    main(sys.argv[1:])
