"""Who acts through ``weft cancel|retry|resume|fork|reset``, and their record.

The invariant: **every run the CLI changes for an operator gets an admin
History entry** (``django.contrib.admin.models.LogEntry``), as the admin's
actions and the API's repairs do -- with or without ``--user``. A
``LogEntry`` must name a user, so:

* ``--user USERNAME``: that user (an unknown name is refused, exit 2, before
  anything is written); the actor the client records (claim events, a
  reset's rotation) is ``cli:USERNAME``;
* no ``--user``: the system user ``weft-cli`` (created on first use,
  inactive, no usable password: it can never log in), the actor ``cli:weft``.

Either way the change message also names the OS user that ran the command
(``getpass.getuser()``), so "who cancelled this run from a shell" has an
answer even without ``--user``. ``--user`` is checked before the action;
the History rows (and, the first time, the system user) are written after
it committed (one bulk insert per action), so a refused command writes
nothing. Without ``django.contrib.admin``
installed there is no History to write to: nothing is logged, no user made.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management.base import CommandParser

from weft_django.models import WorkflowRun

from .console import EXIT_USAGE, CliError, shown

#: The user History entries name when no ``--user`` is given.
SYSTEM_USERNAME = "weft-cli"
#: The actor recorded without ``--user`` (claim events, a reset's rotation).
SYSTEM_ACTOR = "cli:weft"


@dataclass(frozen=True)
class Operator:
    """The person behind one command."""

    #: What the client records as the actor: ``cli:USERNAME`` or ``cli:weft``.
    actor: str
    #: The ``--user`` user (``None``: the system user).
    user: Any
    #: The OS account that ran the command.
    os_user: str

    @property
    def described(self) -> str:
        """The operator as a History message names them."""
        return f"{self.actor} (OS user {self.os_user})"

    def history_user(self) -> Any:
        """The user History entries name: ``--user``'s, else the system user --
        made only now, once the action committed, so a refused command writes
        nothing at all (``None``: no admin installed, no History)."""
        if not apps.is_installed("django.contrib.admin"):
            return None
        return self.user if self.user is not None else _system_user(get_user_model())


def add_user_argument(parser: CommandParser) -> None:
    parser.add_argument(
        "--user",
        metavar="USERNAME",
        help="the operator: the runs' admin History names this user and the actor is "
        f"cli:USERNAME (default: the system user {SYSTEM_USERNAME}, actor {SYSTEM_ACTOR}; "
        "the OS user is recorded either way)",
    )


def os_user() -> str:
    try:
        return getpass.getuser()[:100] or "unknown"
    except Exception:  # no login name (a container without one): still audited
        return "unknown"


def operator(options: dict[str, Any]) -> Operator:
    """The command's operator; an unknown ``--user`` is refused (nothing written)."""
    username = options.get("user")
    model = get_user_model()
    if username is not None:
        try:
            user = model._default_manager.get_by_natural_key(username)
        except model.DoesNotExist:
            raise CliError(
                "invalid_argument", f"--user {shown(username)}: no such user", EXIT_USAGE
            ) from None
        return Operator(f"cli:{username}"[:200], user, os_user())
    return Operator(SYSTEM_ACTOR, None, os_user())


def _system_user(model: Any) -> Any:
    manager = model._default_manager
    lookup = {model.USERNAME_FIELD: SYSTEM_USERNAME}
    user = manager.filter(**lookup).first()
    if user is None:
        user = model(**lookup)
        user.is_active = False
        user.set_unusable_password()
        user.save(using=manager.db)
    return user


def audit_runs(op: Operator, runs: Iterable[WorkflowRun], message: str) -> int:
    """One History entry per run in ``runs``: ``message`` plus "by <operator>."."""
    chosen = list(runs)
    user = op.history_user() if chosen else None
    if user is None:
        return 0
    from django.contrib.admin.models import CHANGE, LogEntry

    if chosen:
        LogEntry.objects.log_actions(
            user_id=user.pk,
            queryset=chosen,
            action_flag=CHANGE,
            change_message=f"{message} by {op.described}.",
        )
    return len(chosen)


__all__ = [
    "SYSTEM_ACTOR",
    "SYSTEM_USERNAME",
    "Operator",
    "add_user_argument",
    "audit_runs",
    "operator",
    "os_user",
]
