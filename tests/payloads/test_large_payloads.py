"""A 20 MB input and a 20 MB activity result round-trip through a workflow with
``PAYLOAD_STORAGE`` on the filesystem and ``Encrypt`` on; purge removes their
blobs; ``weft blobs check`` finds nothing left; a missing or altered blob
suspends the run naming it. Plus the ``manage.py check`` errors."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core import checks
from django.core.management import call_command

from weft_django import activity, client, workflow
from weft_django.codecs import blobs
from weft_django.models import JournalEntry, WorkflowRun

KEY = Fernet.generate_key().decode()
BIG = 20 * 1024 * 1024
MARKER = "BLOB-MARKER-91c2"


@pytest.fixture
def blob_settings(settings: Any, tmp_path: Path) -> Path:
    root = tmp_path / "blobs"
    settings.STORAGES = {
        **settings.STORAGES,
        "weft-payloads": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(root)},
        },
    }
    settings.WEFT = {
        **getattr(settings, "WEFT", {}),
        "PAYLOAD_CODECS": ["weft_django.codecs.Encrypt"],
        "ENCRYPTION_KEYS": [KEY],
        "PAYLOAD_STORAGE": {"STORAGE": "weft-payloads", "THRESHOLD_BYTES": 65536},
        "MAX_PAYLOAD_BYTES": 64 * 1024 * 1024,
    }
    return root


@activity(name="lp-grow")
def lp_grow(doc: str) -> str:
    return doc[::-1]


@workflow(name="lp-doc")
def lp_doc(ctx: Any, data: Any) -> Any:
    reversed_doc = yield ctx.run(lp_grow, data["doc"])
    return {"length": len(reversed_doc), "head": reversed_doc[:20]}


def _blob_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.mark.django_db(transaction=True)
def test_twenty_megabytes_round_trip_encrypted_in_storage_and_purge_removes_them(
    weft_env, blob_settings
):
    doc = MARKER + "x" * BIG
    h = client.start("lp-doc", {"doc": doc}, workflow_id="lp-1")
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == {"length": len(doc), "head": ("x" * 20)}
    run = WorkflowRun.objects.get(pk=h.run_id)
    assert run.input == {"doc": doc}
    entry = JournalEntry.objects.get(run_id=h.run_id, kind="activity")
    assert entry.result == doc[::-1]
    files = _blob_files(blob_settings)
    assert len(files) == 2  # the input and the activity result
    for path in files:
        data = path.read_bytes()
        assert MARKER.encode() not in data and MARKER[::-1].encode() not in data
        assert data.startswith(b"gAAAAA")  # a Fernet token
    out = io.StringIO()
    call_command("weft", "blobs", "check", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"orphans": [], "dangling": []}
    client.purge("lp-1")
    assert _blob_files(blob_settings) == []
    out = io.StringIO()
    call_command("weft", "blobs", "check", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"orphans": [], "dangling": []}


@pytest.mark.django_db(transaction=True)
def test_a_shared_blob_stays_while_another_run_refers_to_it(weft_env, blob_settings):
    doc = "y" * 200_000
    client.start("lp-doc", {"doc": doc}, workflow_id="lp-a")
    client.start("lp-doc", {"doc": doc}, workflow_id="lp-b")
    weft_env.run_until_idle()
    # Fernet tokens differ per write, so each run has its own blobs; an
    # identical envelope (a copied row) shares one: copy lp-a's input to lp-b.
    a = WorkflowRun.objects.get(workflow_id="lp-a")
    b = WorkflowRun.objects.get(workflow_id="lp-b")
    WorkflowRun.objects.filter(pk=b.pk).update(input=a.input)
    before = set(_blob_files(blob_settings))
    client.purge("lp-a")
    after = set(_blob_files(blob_settings))
    assert after < before
    assert WorkflowRun.objects.get(pk=b.pk).input == {"doc": doc}


@pytest.mark.django_db(transaction=True)
def test_a_missing_blob_suspends_the_run_naming_it(weft_env, blob_settings, settings):
    h = client.start("lp-doc", {"doc": "z" * 100_000}, workflow_id="lp-gone")
    stored = WorkflowRun.objects.filter(pk=h.run_id).values_list("input", flat=True).get()
    assert stored == {"doc": "z" * 100_000}
    for path in _blob_files(blob_settings):
        path.unlink()
    weft_env.run_until_idle()
    run = WorkflowRun.objects.get(pk=h.run_id)
    assert run.status == "suspended"
    assert run.error["type"] == "PayloadUnreadable"
    assert "input" in run.error["message"] and blobs.PREFIX in run.error["message"]
    out = io.StringIO()
    call_command("weft", "blobs", "check", "--json", stdout=out)
    assert len(json.loads(out.getvalue())["dangling"]) == 1


def _ids(messages: list[Any]) -> list[tuple[str, str]]:
    return [(m.id, m.msg) for m in messages if m.id and m.id.startswith("weft.E07")]


def test_check_errors_name_the_bad_key(settings):
    settings.WEFT = {
        "PAYLOAD_CODECS": ["weft_django.codecs.Encrypt", "no.such.Codec"],
        "ENCRYPTION_KEYS": [KEY, "not-a-key"],
        "PAYLOAD_STORAGE": {"STORAGE": "nowhere", "THRESHOLD_BYTES": 10**9},
    }
    found = _ids(checks.run_checks(tags=["weft"]))
    text = "\n".join(msg for _id, msg in found)
    assert ("weft.E070" in dict(found)) and "'no.such.Codec' does not import" in text
    assert 'WEFT["ENCRYPTION_KEYS"][1] is not a valid Fernet key' in text
    assert "'nowhere', not an alias in STORAGES" in text
    assert "above MAX_PAYLOAD_BYTES" in text
