"""Running ``manage.py weft`` in the test process (``call_command``) and reading
what it printed, its exit status and its JSON."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

from django.core.management import call_command
from django.core.management.base import CommandError


@dataclass
class Ran:
    out: str
    err: str
    exit_code: int
    message: str = ""

    @property
    def data(self) -> Any:
        return json.loads(self.out)


def weft(*args: str, stdin: Any = None) -> Ran:
    """``manage.py weft ARGS`` in this process: stdout, stderr, exit status (and
    the CommandError's message when it failed)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("weft", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return Ran(out.getvalue(), err.getvalue(), exc.returncode, str(exc))
    return Ran(out.getvalue(), err.getvalue(), 0)
