"""With ``Encrypt`` on, no payload column holds a marker string in plaintext,
the workload completes, key rotation keeps every payload readable, and a
tampered ciphertext suspends the run naming it, with nothing lost."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection

from weft_django import activity, client, workflow
from weft_django.errors import ActivityError
from weft_django.models import (
    AsyncActivity,
    JournalEntry,
    SignalMessage,
    StreamEntry,
    WorkflowEvent,
    WorkflowRun,
)

MARKER = "MARKER-7f3a-secret"
KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()
TOKENS: list[str] = []

#: Every payload column (model, column) the codecs wire.
PAYLOAD_COLUMNS = [
    (WorkflowRun, "input"),
    (WorkflowRun, "result"),
    (WorkflowRun, "error"),
    (JournalEntry, "result"),
    (JournalEntry, "error"),
    (SignalMessage, "payload"),
    (AsyncActivity, "result"),
    (AsyncActivity, "error"),
    (WorkflowEvent, "value"),
    (StreamEntry, "value"),
]


def _weft(settings: Any, keys: list[str]) -> None:
    settings.WEFT = {
        **getattr(settings, "WEFT", {}),
        "PAYLOAD_CODECS": ["weft_django.codecs.Encrypt"],
        "ENCRYPTION_KEYS": keys,
    }


@activity(name="pe-echo")
def pe_echo(value: Any) -> Any:
    return {"echo": value}


@activity(name="pe-fail", retries=0)
def pe_fail(value: Any) -> Any:
    raise ValueError(f"refused {value}")


@activity(name="pe-handout")
def pe_handout(token: str) -> None:
    TOKENS.append(token)


@workflow(name="pe-all-kinds")
def pe_all_kinds(ctx: Any, data: Any) -> Any:
    echoed = yield ctx.run(pe_echo, data["marker"])
    try:
        yield ctx.run(pe_fail, data["marker"])
    except ActivityError as exc:
        failed = exc.message
    ctx.set_event("status", data["marker"])
    ctx.write_stream("progress", {"note": data["marker"]})
    signalled = yield ctx.wait_for_signal("go")
    paid = yield ctx.async_activity(pe_handout)
    return {"echo": echoed, "failed": failed, "signal": signalled, "paid": paid}


def _raw_columns() -> str:
    """Every payload column as the database holds it (bypassing the field)."""
    dumped = []
    with connection.cursor() as cursor:
        for model, column in PAYLOAD_COLUMNS:
            table = connection.ops.quote_name(model._meta.db_table)
            cursor.execute(f"SELECT {connection.ops.quote_name(column)} FROM {table}")
            dumped.extend(str(row[0]) for row in cursor.fetchall())
    return "\n".join(dumped)


def _drive_to_end(weft_env: Any, workflow_id: str) -> Any:
    TOKENS.clear()
    h = client.start("pe-all-kinds", {"marker": MARKER}, workflow_id=workflow_id)
    weft_env.run_until_idle()
    assert h.status() == "parked"
    client.signal(workflow_id, "go", {"from": MARKER})
    weft_env.run_until_idle()
    assert TOKENS, "the async activity was handed out"
    client.complete_async_activity(TOKENS[-1], {"receipt": MARKER})
    weft_env.run_until_idle()
    return h


@pytest.mark.django_db(transaction=True)
def test_no_payload_column_holds_the_marker_and_the_workload_completes(weft_env, settings):
    _weft(settings, [KEY_A])
    h = _drive_to_end(weft_env, "pe-1")
    assert h.status() == "completed", h.error()
    result = h.result(timeout=1)
    assert result["echo"] == {"echo": MARKER}
    assert MARKER in result["failed"]
    assert result["signal"] == {"from": MARKER}
    assert result["paid"] == {"receipt": MARKER}
    assert client.get_event("pe-1", "status") == MARKER
    assert list(client.read_stream("pe-1", "progress")) == [{"note": MARKER}]
    raw = _raw_columns()
    assert "__weft_codec__" in raw
    assert MARKER not in raw
    # The whole database, as text, too (SQLite: every table; PostgreSQL: the weft tables).
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
        for table in tables:
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            assert MARKER not in json.dumps(cursor.fetchall(), default=str), table


@pytest.mark.django_db(transaction=True)
def test_key_rotation_then_reencrypt_then_the_new_key_alone(weft_env, settings):
    _weft(settings, [KEY_A])
    TOKENS.clear()
    h = client.start("pe-all-kinds", {"marker": MARKER}, workflow_id="pe-rot")
    weft_env.run_until_idle()
    assert h.status() == "parked"
    _weft(settings, [KEY_B, KEY_A])  # B added first: A still decrypts
    client.signal("pe-rot", "go", {"from": MARKER})
    weft_env.run_until_idle()
    client.complete_async_activity(TOKENS[-1], {"receipt": MARKER})
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    call_command("weft", "reencrypt", "--batch", "3")
    only_a = Fernet(KEY_A.encode())
    with connection.cursor() as cursor:
        for model, column in PAYLOAD_COLUMNS:
            cursor.execute(
                f"SELECT {connection.ops.quote_name(column)} FROM "
                f"{connection.ops.quote_name(model._meta.db_table)}"
            )
            for (stored,) in cursor.fetchall():
                if stored is None:
                    continue
                envelope = json.loads(stored) if isinstance(stored, str) else stored
                token = envelope["text"].encode()
                with pytest.raises(Exception):  # noqa: B017 - InvalidToken
                    only_a.decrypt(token)
    _weft(settings, [KEY_B])
    assert h.result(timeout=1)["paid"] == {"receipt": MARKER}
    assert WorkflowRun.objects.get(pk=h.run_id).input == {"marker": MARKER}
    entries = list(JournalEntry.objects.filter(run_id=h.run_id).values_list("result", flat=True))
    assert {"echo": MARKER} in entries


@pytest.mark.django_db(transaction=True)
def test_tampered_ciphertext_suspends_the_run_naming_it_and_loses_nothing(weft_env, settings):
    _weft(settings, [KEY_A])
    TOKENS.clear()
    h = client.start("pe-all-kinds", {"marker": MARKER}, workflow_id="pe-tamper")
    weft_env.run_until_idle()
    assert h.status() == "parked"
    entry = JournalEntry.objects.filter(run_id=h.run_id, position=0).get()
    table = connection.ops.quote_name(JournalEntry._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT result FROM {table} WHERE id = %s", [entry.pk])
        (stored,) = cursor.fetchone()
        envelope = json.loads(stored) if isinstance(stored, str) else stored
        text = envelope["text"]
        envelope["text"] = text[:40] + ("A" if text[40] != "A" else "B") + text[41:]
        tampered = json.dumps(envelope)
        cursor.execute(f"UPDATE {table} SET result = %s WHERE id = %s", [tampered, entry.pk])
    # A fresh replay (no cached one) must read the tampered entry.
    if weft_env.engine.workflow_cache is not None:
        weft_env.engine.workflow_cache.clear()
    client.signal("pe-tamper", "go", {"from": MARKER})
    weft_env.run_until_idle()
    run = WorkflowRun.objects.get(pk=h.run_id)
    assert run.status == "suspended"
    assert run.error["type"] == "PayloadUnreadable"
    assert str(h.run_id) in run.error["message"]
    assert "journal position 0 (result)" in run.error["message"]
    assert MARKER not in json.dumps(run.error)
    with connection.cursor() as cursor:  # the tampered value is kept as it was
        cursor.execute(f"SELECT result FROM {table} WHERE id = %s", [entry.pk])
        (after,) = cursor.fetchone()
    after = json.loads(after) if isinstance(after, str) else after
    assert after == json.loads(tampered)
    assert SignalMessage.objects.filter(run_id=h.run_id).count() == 1  # the signal is kept
