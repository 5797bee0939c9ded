"""``manage.py weft_force_release <workflow_id>``: rotate a workflow's claim.

For an operator who knows an owner is wedged (or wants a workflow moved):
the claim's epoch is rotated (epoch + 1, holder deleted) in one conditional
write through ``client.force_release`` -- the same rotation the admin's
"force release" performs. The current owner's next fenced write fails and
it stops driving the workflow; any engine picks the run up under the new
epoch. The run's status is not changed. The new epoch is printed alone on
stdout (for scripts), the explanation on stderr. Audited like the other
operator commands (``management.cli.operator``): the workflow's latest run
gets an admin History entry naming ``--user`` (or the system user) and the
OS user.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from weft_django import client
from weft_django.conf import get_settings
from weft_django.errors import WeftError
from weft_django.management import checked_args as checked
from weft_django.management.cli.console import CliError
from weft_django.management.cli.operator import add_user_argument, audit_runs, operator
from weft_django.models import WorkflowClaim, WorkflowRun


class Command(BaseCommand):
    help = "Rotate a workflow's claim (epoch + 1, holder deleted); prints the new epoch."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workflow_id")
        parser.add_argument(
            "--actor",
            default="cli:weft_force_release",
            help="recorded as the ClaimEvent's engine id (default: cli:weft_force_release)",
        )
        add_user_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        # Outside OWNERSHIP="workflow-lease" force_release itself refuses
        # (ImproperlyConfigured, nothing written): reported as a CommandError.
        settings = get_settings()
        workflow_id = checked.workflow_id(options["workflow_id"])
        actor = checked.text("--actor", str(options["actor"]))
        db = settings.database
        try:
            who = operator(options)  # an unknown --user: refused, nothing written
        except CliError as exc:
            raise CommandError(str(exc)) from exc
        claim = WorkflowClaim.objects.using(db).filter(pk=workflow_id).first()
        if (
            claim is None
            and not WorkflowRun.objects.using(db).filter(workflow_id=workflow_id).exists()
        ):
            # Rotating an id nobody ever used would invent a claim row for it.
            raise CommandError(f"no claim and no run for workflow id {workflow_id!r}")
        previous = (claim.epoch, claim.engine_id) if claim is not None else (0, None)
        try:
            epoch = client.force_release(workflow_id, actor=actor)
        except (WeftError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from exc
        holder = previous[1] or "no holder"
        latest = (
            WorkflowRun.objects.using(db)
            .filter(workflow_id=workflow_id)
            .order_by("-created_at")[:1]
        )
        audit_runs(who, latest, f"Force-released the claim (epoch {previous[0]} -> {epoch})")
        # The new epoch alone on stdout (for scripts); the explanation on stderr.
        self.stderr.write(
            f"{workflow_id}: epoch {previous[0]} -> {epoch} (was held by {holder}); "
            "the previous owner stops driving it at its next fenced write"
        )
        self.stdout.write(str(epoch))
