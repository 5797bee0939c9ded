"""End to end with ``Encrypt`` on: two real ``weft_worker`` processes on
PostgreSQL (codecs and key from the environment, ``project.settings``) run a
workload that puts one marker into every kind of payload; the owner is
SIGKILLed mid-way and the other engine takes over, replaying the encrypted
journal; the workload completes. A literal ``pg_dump`` of the test database
then holds the marker nowhere, while the same dump shows the run's
search attribute (plaintext by design: the control that the check sees the
data). A query, ``weft_replay_check``, ``weft history export`` and the
admin (for a holder of ``weft.view_payload``) show the decoded values; a
user without the permission sees none of them.
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
from datetime import timedelta
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import connection
from django.test import Client

from tests.engines.harness import Worker, wait_for
from tests.payloads.process_workflows import IMPORTS, SEARCHABLE
from weft_django import client
from weft_django.models import (
    ActivityHeartbeat,
    AsyncActivity,
    JournalEntry,
    Schedule,
    WorkflowClaim,
    WorkflowRun,
)

pytestmark = [pytest.mark.processes]

MARKER = "E2E-PAYLOAD-MARKER-5c0f93"
KEY = Fernet.generate_key().decode()
CHILD_ENV = {
    "WEFT_PAYLOAD_CODECS": "weft_django.codecs.Encrypt",
    "WEFT_ENCRYPTION_KEYS": KEY,
    "WEFT_SEARCH_ATTRIBUTES": json.dumps({"tag": "str"}),
}
WID = "pp-e2e"
WAIT_S = 60.0  # hang protection only


def _dump() -> str:
    """``pg_dump`` of the test database, as plain SQL text."""
    params = connection.settings_dict
    command = ["pg_dump", "--no-owner", "-h", params["HOST"] or "127.0.0.1"]
    command += ["-p", str(params["PORT"] or 5432), "-U", params["USER"] or "postgres"]
    done = subprocess.run(
        [*command, params["NAME"]], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout


def _user(django_user_model: Any, name: str, *, payloads: bool) -> Any:
    user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
    codenames = ["view_workflowrun", "view_journalentry"] + (["view_payload"] if payloads else [])
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def _run_the_workload(tmp_path: Any, workers: list[Worker]) -> Any:
    for engine_id in ("pp-w1", "pp-w2"):
        worker = Worker(engine_id, tmp_path, env=CHILD_ENV, imports=IMPORTS)
        workers.append(worker)
    for worker in workers:
        worker.wait_booted()
    client.create_schedule("pp-sched", "pp-proc-ticked", {"m": MARKER}, every=timedelta(hours=1))
    ticked = client.trigger_schedule("pp-sched")
    handle = client.start("pp-proc-all", {"marker": MARKER}, workflow_id=WID)

    def parked_at_go() -> bool:
        entries = JournalEntry.objects.filter(run_id=handle.run_id)
        kinds = set(entries.values_list("kind", flat=True))
        run = WorkflowRun.objects.get(pk=handle.run_id)
        assert run.status not in ("failed", "suspended"), run.error
        return "child" in kinds and run.status == "parked"

    wait_for("the workload to park at its signal", parked_at_go, *workers, timeout=WAIT_S)
    owner_id = WorkflowClaim.objects.get(workflow_id=WID).engine_id
    owner = next(w for w in workers if w.engine_id == owner_id)
    owner.kill()  # SIGKILL mid-way: the other engine takes over and replays
    assert owner.proc.returncode == -signal.SIGKILL
    survivor = next(w for w in workers if w is not owner)
    client.signal(WID, "go", {"from": MARKER})
    pending = wait_for(
        "the async activity to be handed out",
        lambda: AsyncActivity.objects.filter(run_id=handle.run_id).first(),
        survivor,
        timeout=WAIT_S,
    )
    client.complete_async_activity_by_hash(pending.token_hash, {"receipt": MARKER})
    answer = client.update(WID, "add", {"upd": MARKER}, timeout=WAIT_S)
    assert answer == {"added": {"upd": MARKER}}
    wait_for(
        "the async result to be consumed",
        lambda: (
            WorkflowRun.objects.get(pk=handle.run_id).status == "parked"
            and {"receipt": MARKER} in client.query(WID, "seen")
        ),
        survivor,
        timeout=WAIT_S,
    )
    assert ticked.result(timeout=WAIT_S) == {"echo": {"m": MARKER}}
    return handle, owner_id, survivor


EXPECTED = [
    {"echo": MARKER},
    {"beat": MARKER},
    {"child": {"echo": MARKER}},
    {"from": MARKER},
    {"receipt": MARKER},
    {"upd": MARKER},
]


@pytest.mark.django_db(transaction=True)
def test_encrypted_workload_across_a_sigkill_leaves_no_marker_in_a_pg_dump(
    tmp_path: Any, settings: Any, django_user_model: Any
) -> None:
    assert connection.vendor == "postgresql"
    settings.WEFT = {
        **getattr(settings, "WEFT", {}),
        "PAYLOAD_CODECS": ["weft_django.codecs.Encrypt"],
        "ENCRYPTION_KEYS": [KEY],
        "SEARCH_ATTRIBUTES": {"tag": "str"},
    }
    workers: list[Worker] = []
    try:
        handle, dead, survivor = _run_the_workload(tmp_path, workers)
        # The survivor took the workflow over and replayed the encrypted journal.
        assert WorkflowClaim.objects.get(workflow_id=WID).engine_id == survivor.engine_id != dead

        # A query replays the journal in this process: decoded values.
        seen = client.query(WID, "seen")
        for value in EXPECTED:
            assert value in seen, (value, seen)
        assert any(isinstance(v, str) and MARKER in v for v in seen)  # the recorded error
        # The replay check of live runs reads them decoded too.
        out = io.StringIO()
        call_command("weft_replay_check", "--workflow", "pp-proc-all", stdout=out)
        assert "1 live run(s) replayed, 0 finding(s)" in out.getvalue()

        client.signal(WID, "end", None)
        result = handle.result(timeout=WAIT_S)
        assert all(value in result for value in EXPECTED), result
        run = WorkflowRun.objects.get(pk=handle.run_id)
        assert run.status == "completed" and run.input == {"marker": MARKER}
        assert client.get_event(WID, "status") == {"m": MARKER}
        assert list(client.read_stream(WID, "progress")) == [{"note": MARKER}]
        beat = ActivityHeartbeat.objects.get(run_id=handle.run_id)
        assert beat.details == {"progress": MARKER}
        assert Schedule.objects.get(pk="pp-sched").input == {"m": MARKER}
    finally:
        for worker in workers:
            worker.kill()

    # The literal dump: no marker anywhere; the plaintext search attribute and
    # the envelopes are there (the control that the dump holds the data).
    dump = _dump()
    assert SEARCHABLE in dump
    assert "__weft_codec__" in dump
    assert MARKER not in dump, [line[:200] for line in dump.splitlines() if MARKER in line]

    # weft history export: decoded, no envelope.
    out = io.StringIO()
    call_command("weft", "history", "export", WID, stdout=out)
    document = json.loads(out.getvalue())
    assert "__weft_codec__" not in out.getvalue()
    assert document["run"]["input"] == {"marker": MARKER}
    assert {"echo": MARKER} in [entry["result"] for entry in document["journal"]]
    assert [s["payload"] for s in document["signals"] if s["name"] == "go"] == [{"from": MARKER}]
    assert [u["args"] for u in document["updates"]] == [[{"upd": MARKER}]]

    # The admin: decoded for a holder of the permission, hidden otherwise.
    page = f"/admin/weft/workflowrun/{handle.run_id}/change/"
    allowed, denied = Client(), Client()
    allowed.force_login(_user(django_user_model, "reader", payloads=True))
    denied.force_login(_user(django_user_model, "clerk", payloads=False))
    shown = allowed.get(page)
    assert shown.status_code == 200 and MARKER in shown.content.decode()
    hidden = denied.get(page)
    assert hidden.status_code == 200
    assert MARKER not in hidden.content.decode()
    assert "hidden" in hidden.content.decode()
