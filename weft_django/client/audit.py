"""The operator's record of a fork or a reset: one admin ``LogEntry`` per run.

Invariant: every surface that repairs a run for a person -- the admin's
"fork / reset from here", ``POST workflows/<id>/fork/`` and ``reset/``,
``weft fork`` / ``weft reset`` (under ``--user``'s user, else the system
user ``management.cli.operator`` makes) -- leaves the same record: the source
run's History says "<Verb> at position N by <actor>: new run <pk>." and the
new run's "<Verb> from run <pk> at position N by <actor>.", under the user
who acted. The actor string is the one other operator actions record
(``admin:<user>``, ``api:<user>``, ``cli:<user>``; a reset's claim rotation
carries it too; the CLI adds the OS user to the message). Written after the
repair committed; without an authenticated user, or without
``django.contrib.admin`` installed, nothing is logged (there is no History
to write to).
"""

from __future__ import annotations

from typing import Any, Literal

from django.apps import apps

from weft_django.conf import get_settings
from weft_django.models import WorkflowRun

RepairAction = Literal["fork", "reset"]


def log_repair(
    action: RepairAction, new_run_id: str, at_position: int, *, actor: str, user: Any
) -> bool:
    """Log the repair that started run ``new_run_id``; whether anything was written."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    if not apps.is_installed("django.contrib.admin"):
        return False
    from django.contrib.admin.models import CHANGE, LogEntry

    db = get_settings().database
    new = WorkflowRun.objects.using(db).get(pk=new_run_id)
    source = (
        WorkflowRun.objects.using(db).filter(pk=new.continued_from_id).first()
        if new.continued_from_id is not None
        else None
    )
    verb = "Forked" if action == "fork" else "Reset"
    if source is not None:
        LogEntry.objects.log_actions(
            user_id=user.pk,
            queryset=[source],
            action_flag=CHANGE,
            change_message=f"{verb} at position {at_position} by {actor}: new run {new.pk}.",
        )
    origin = f"run {source.pk}" if source is not None else "a purged run"
    LogEntry.objects.log_actions(
        user_id=user.pk,
        queryset=[new],
        action_flag=CHANGE,
        change_message=f"{verb} from {origin} at position {at_position} by {actor}.",
    )
    return True


__all__ = ["RepairAction", "log_repair"]
