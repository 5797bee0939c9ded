"""Every run ``weft cancel|retry|resume|fork|reset`` changes gets an admin History
entry (``LogEntry``), with or without ``--user``: under that user, else under the
system user ``weft-cli`` (inactive, no usable password); the message names the
actor and the OS user either way. A refused command writes nothing -- not even
the system user."""

from __future__ import annotations

import getpass
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model

import tests.cli.workflows  # noqa: F401  (registers the workflows)
from tests.cli.helpers import weft
from tests.e2e.helpers import row_counts
from tests.e2e.test_fork_reset import fr_four, fr_wait  # noqa: F401  (registers them)
from weft_django import client
from weft_django.management.cli.operator import SYSTEM_USERNAME
from weft_django.models import ClaimEvent, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)

OS_USER = getpass.getuser()


def history(run_id: Any) -> list[tuple[str, str]]:
    """``(username, message)`` of each History entry of run ``run_id``."""
    return [
        (e.user.get_username(), e.change_message)
        for e in LogEntry.objects.filter(object_id=str(run_id)).order_by("id")
    ]


def latest(workflow_id: str) -> WorkflowRun:
    run = WorkflowRun.objects.latest_for(workflow_id)
    assert run is not None
    return run


@pytest.fixture
def ops(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("ops", password="x", is_staff=True)


def test_actions_by_id_without_user_are_audited_under_the_system_user(weft_env: Any) -> None:
    client.start("cli-waiter", 1, workflow_id="w1")
    client.start("cli-failing", 2, workflow_id="f1")
    weft_env.run_until_idle()
    assert not get_user_model().objects.filter(username=SYSTEM_USERNAME).exists()

    assert weft("cancel", "w1", "--reason", "stop").exit_code == 0
    w1 = latest("w1")
    by = f"cli:weft (OS user {OS_USER})"
    assert history(w1.pk) == [(SYSTEM_USERNAME, f"Cancelled with weft cancel by {by}.")]
    system = get_user_model().objects.get(username=SYSTEM_USERNAME)
    assert not system.is_active and not system.has_usable_password()
    # The actor the client recorded is the same operator.
    assert ClaimEvent.objects.filter(workflow_id="w1", kind="rotate").get().engine_id == "cli:weft"

    f1 = latest("f1")
    assert weft("retry", "f1").exit_code == 0
    assert history(f1.pk) == [(SYSTEM_USERNAME, f"Retried with weft retry by {by}.")]
    # The system user is made once.
    assert get_user_model().objects.filter(username=SYSTEM_USERNAME).count() == 1


def test_actions_with_user_are_audited_under_that_user(weft_env: Any, ops: Any) -> None:
    client.start("cli-sleeper", 1, workflow_id="s1")
    weft_env.run_until_idle()
    client.suspend("s1")
    s1 = latest("s1")
    assert weft("resume", "s1", "--user", "ops").exit_code == 0
    assert history(s1.pk) == [("ops", f"Resumed with weft resume by cli:ops (OS user {OS_USER}).")]
    assert not get_user_model().objects.filter(username=SYSTEM_USERNAME).exists()


def test_a_bulk_action_audits_each_run_it_changed(weft_env: Any, ops: Any) -> None:
    for wid in ("w1", "w2"):
        client.start("cli-waiter", 0, workflow_id=wid)
    client.start("cli-quick", 0, workflow_id="q1")
    weft_env.run_until_idle()
    ran = weft(
        "cancel", "--workflow", "cli-waiter", "--workflow", "cli-quick", "--yes", "--user", "ops"
    )
    assert ran.exit_code == 0, ran
    for wid in ("w1", "w2"):
        [(user, message)] = history(latest(wid).pk)
        assert user == "ops" and message.startswith("Cancelled with weft cancel ("), message
        assert message.endswith(f" by cli:ops (OS user {OS_USER})."), message
    assert history(latest("q1").pk) == []  # completed: skipped, not changed


def test_refused_commands_write_nothing(weft_env: Any) -> None:
    client.start("cli-waiter", 1, workflow_id="w1")
    client.start("cli-quick", 1, workflow_id="q1")
    client.start("fr-four", None, workflow_id="fr-1")
    weft_env.run_until_idle()
    users = get_user_model().objects.count()
    before = (row_counts(), LogEntry.objects.count())
    for args, exit_code in [
        (("resume", "w1"), 4),
        (("cancel", "q1"), 4),
        (("cancel", "w1", "--user", "nobody"), 2),
        (("reset", "fr-1", "--at", "99"), 2),
        (("fork", "fr-1", "--at", "99"), 2),
        (("fork", "fr-1", "--at", "1", "--user", "nobody"), 2),
    ]:
        ran = weft(*args)
        assert ran.exit_code == exit_code, (args, ran)
    assert (row_counts(), LogEntry.objects.count()) == before
    assert get_user_model().objects.count() == users  # no system user made either
    assert latest("w1").status == "parked"


def test_fork_and_reset_without_user_are_audited(weft_env: Any) -> None:
    source = client.start("fr-wait", None, workflow_id="fr-sys")
    weft_env.run_until_idle()
    by = f"cli:weft (OS user {OS_USER})"
    ran = weft("fork", "fr-sys", "--at", "1", "--id", "fr-sys-2", "--json")
    assert ran.exit_code == 0, ran
    forked = ran.data["run_id"]
    assert history(source.run_id) == [
        (SYSTEM_USERNAME, f"Forked at position 1 by {by}: new run {forked}.")
    ]
    assert history(forked) == [
        (SYSTEM_USERNAME, f"Forked from run {source.run_id} at position 1 by {by}.")
    ]
    ran = weft("reset", "fr-sys", "--at", "1", "--reason", "redo")
    assert ran.exit_code == 0, ran
    new = latest("fr-sys")
    assert history(source.run_id)[-1] == (
        SYSTEM_USERNAME,
        f"Reset at position 1 by {by}: new run {new.pk}.",
    )
    assert history(new.pk) == [
        (SYSTEM_USERNAME, f"Reset from run {source.run_id} at position 1 by {by}.")
    ]
    assert ClaimEvent.objects.filter(workflow_id="fr-sys", kind="rotate").get().engine_id == (
        "cli:weft"
    )


def test_force_release_is_audited_and_an_unknown_user_writes_nothing(weft_env: Any) -> None:
    from io import StringIO

    from django.core.management import CommandError, call_command

    client.start("cli-waiter", 1, workflow_id="fr1")
    weft_env.run_until_idle()
    run = latest("fr1")
    with pytest.raises(CommandError, match="nobody"):
        call_command(
            "weft_force_release", "fr1", "--user", "nobody", stdout=StringIO(), stderr=StringIO()
        )
    assert history(run.pk) == []
    assert not ClaimEvent.objects.filter(workflow_id="fr1", kind="rotate").exists()
    assert not get_user_model().objects.filter(username=SYSTEM_USERNAME).exists()

    out = StringIO()
    call_command("weft_force_release", "fr1", stdout=out, stderr=StringIO())
    epoch = int(out.getvalue().strip())
    [(user, message)] = history(run.pk)
    assert user == SYSTEM_USERNAME
    assert message == (
        f"Force-released the claim (epoch {epoch - 1} -> {epoch}) by cli:weft (OS user {OS_USER})."
    )
