"""With ``Encrypt`` on, the tools that replay a run read its payloads decoded:
a query (a replay of the journal), ``weft_replay_check`` on live runs and on
an exported file, ``weft history export`` (plain values, no envelope) and
``testing.replay_history`` on that export -- which then needs no key."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.e2e.helpers import swapped_workflow
from weft_django import activity, client, workflow
from weft_django.codecs.stored import MARKER as ENVELOPE
from weft_django.errors import WorkflowTimeoutError
from weft_django.testing import replay_history

MARKER = "REPLAY-MARKER-e90b"
KEY = Fernet.generate_key().decode()

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def encrypted(settings: Any) -> None:
    settings.WEFT = {
        **getattr(settings, "WEFT", {}),
        "PAYLOAD_CODECS": ["weft_django.codecs.Encrypt"],
        "ENCRYPTION_KEYS": [KEY],
    }


@activity(name="er-echo")
def er_echo(value: Any) -> Any:
    return {"echo": value}


def _body(ctx: Any, data: Any, *, strict: bool) -> Any:
    seen: list[Any] = []
    ctx.on_query("seen", lambda: list(seen))

    def add(item: Any) -> int:
        seen.append(item)
        return len(seen)

    ctx.on_update("add", add)
    echoed = yield ctx.run(er_echo, data["marker"])
    seen.append(echoed)
    signalled = yield ctx.wait_for_signal("go")
    seen.append(signalled)
    if strict:  # a release that reads the recorded values: a raw envelope fails it
        assert echoed == {"echo": MARKER}, echoed
        assert signalled == {"from": MARKER}, signalled
    # Branching on the decoded value: an undecoded envelope takes the other path.
    yield ctx.run(er_echo, "matched" if signalled == {"from": data["marker"]} else "other")
    yield ctx.wait_for_signal("end")
    return seen


@workflow(name="er-flow")
def er_flow(ctx: Any, data: Any) -> Any:
    return (yield from _body(ctx, data, strict=False))


def er_flow_strict(ctx: Any, data: Any) -> Any:
    return (yield from _body(ctx, data, strict=True))


def _parked(weft_env: Any, workflow_id: str = "er-1") -> Any:
    h = client.start("er-flow", {"marker": MARKER}, workflow_id=workflow_id)
    weft_env.run_until_idle()
    client.signal(workflow_id, "go", {"from": MARKER})
    weft_env.run_until_idle()
    with pytest.raises(WorkflowTimeoutError):  # submitted; the owner answers
        client.update(workflow_id, "add", {"added": MARKER}, timeout=0)
    weft_env.run_until_idle()
    assert h.status() == "parked", h.error()
    return h


EXPECTED = [{"echo": MARKER}, {"from": MARKER}, {"added": MARKER}]


def test_a_query_replays_decoded_values(weft_env, encrypted) -> None:
    _parked(weft_env)
    if weft_env.engine.workflow_cache is not None:
        weft_env.engine.workflow_cache.clear()
    assert client.query("er-1", "seen") == EXPECTED


def _replay_check(*args: str) -> tuple[str, CommandError | None]:
    out = io.StringIO()
    try:
        call_command("weft_replay_check", *args, stdout=out, stderr=io.StringIO())
    except CommandError as exc:
        return out.getvalue(), exc
    return out.getvalue(), None


def test_the_replay_check_reads_decoded_values(weft_env, encrypted) -> None:
    _parked(weft_env)
    out, failed = _replay_check()
    assert failed is None, out
    assert "1 live run(s) replayed, 0 finding(s)" in out
    with swapped_workflow("er-flow", er_flow_strict):
        out, failed = _replay_check()
    assert failed is None, out
    assert "1 live run(s) replayed, 0 finding(s)" in out


def test_export_is_decoded_and_replays_with_no_key(weft_env, encrypted, settings, tmp_path):
    h = _parked(weft_env)
    client.signal("er-1", "end", None)
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    out = io.StringIO()
    call_command("weft", "history", "export", "er-1", stdout=out)
    text = out.getvalue()
    assert ENVELOPE not in text
    document = json.loads(text)
    assert document["run"]["input"] == {"marker": MARKER}
    assert document["run"]["result"] == EXPECTED
    assert {"echo": MARKER} in [entry["result"] for entry in document["journal"]]
    assert [s["payload"] for s in document["signals"] if s["name"] == "go"] == [{"from": MARKER}]
    assert [u["args"] for u in document["updates"]] == [[{"added": MARKER}]]
    path = Path(tmp_path) / "er-1.json"
    path.write_text(text)
    assert replay_history(path) == EXPECTED
    assert replay_history(path, er_flow_strict) == EXPECTED
    out_check, failed = _replay_check("--history", str(path))
    assert failed is None, out_check
    # The file is self-contained: replayed where no key is configured at all.
    settings.WEFT = {**settings.WEFT, "PAYLOAD_CODECS": [], "ENCRYPTION_KEYS": []}
    assert replay_history(path, er_flow_strict) == EXPECTED
