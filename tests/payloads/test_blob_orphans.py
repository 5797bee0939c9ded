"""A blob written for a write whose transaction rolled back (here: a fenced
batch that fails its gate, and a plain rollback) is an orphan, never a
dangling reference; ``weft blobs check --delete-orphans`` removes it once
older than its grace, keeps a young one and every referenced blob."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from weft_django import client, workflow
from weft_django.codecs import blobs
from weft_django.engine.payload_rows import blob_problems
from weft_django.models import WorkflowRun
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.ops import RunCondition, Update

KEY = Fernet.generate_key().decode()
BIG = "o" * 200_000


@pytest.fixture
def blob_root(settings: Any, tmp_path: Path) -> Path:
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
    }
    return root


@workflow(name="bo-wait")
def bo_wait(ctx: Any, data: Any) -> Any:
    return (yield ctx.wait_for_signal("go"))


def _files(root: Path) -> set[str]:
    return {p.name for p in root.rglob("*") if p.is_file()}


def _check(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("weft", "blobs", "check", "--json", *args, stdout=out)
    return dict(json.loads(out.getvalue()))


def _age(root: Path, digest: str, seconds: float) -> None:
    path = next(p for p in root.rglob(digest))
    then = time.time() - seconds
    os.utime(path, (then, then))


@pytest.mark.django_db(transaction=True)
def test_a_failed_fenced_batch_leaves_an_orphan_that_delete_orphans_removes(weft_env, blob_root):
    h = client.start("bo-wait", {"doc": BIG}, workflow_id="bo-1")
    weft_env.run_until_idle()
    kept = _files(blob_root)
    assert len(kept) == 1  # the input, referenced
    # A fenced write of a large result whose gate fails (the run is not in
    # that status): nothing is written, but the blob may already be.
    result = conditional_batch(
        [RunCondition(h.run_id, statuses=frozenset({"completed"}), label="gate")],
        [Update(WorkflowRun, {"pk": h.run_id}, {"result": {"doc": BIG + "r"}})],
    )
    assert not result.committed
    after_gate = _files(blob_root) - kept
    # And a plain rollback of a write that stored a blob.
    with pytest.raises(RuntimeError), transaction.atomic():
        WorkflowRun.objects.filter(pk=h.run_id).update(error={"doc": BIG + "e"})
        raise RuntimeError("rolled back")
    assert WorkflowRun.objects.get(pk=h.run_id).result is None
    orphans = _files(blob_root) - kept
    # On PostgreSQL the batch is one checked statement whose parameters (the
    # blob) are built before its gate is evaluated.
    assert after_gate < orphans and (bool(after_gate) or connection.vendor != "postgresql")
    assert orphans, "a rolled-back write stored a blob before its transaction ended"
    assert _check()["orphans"] == sorted(orphans)
    assert _check()["dangling"] == []
    # Young orphans are kept (their transaction might still be open) ...
    report = _check("--delete-orphans")
    assert report["deleted"] == [] and report["orphans"] == sorted(orphans)
    # ... old ones go; the referenced input stays whatever its age.
    for digest in orphans | kept:
        _age(blob_root, digest, 7200)
    report = _check("--delete-orphans")
    assert report["deleted"] == sorted(orphans)
    assert report["orphans"] == [] and report["dangling"] == []
    assert _files(blob_root) == kept
    assert WorkflowRun.objects.get(pk=h.run_id).input == {"doc": BIG}
    assert list(blob_problems()) == []


@pytest.mark.django_db(transaction=True)
def test_rewriting_an_existing_blob_restarts_its_grace(weft_env, blob_root, settings):
    """A write that reuses an old orphan (same bytes, so the same name) makes
    it young again, so a concurrent ``--delete-orphans`` cannot delete it
    under a transaction that is about to commit a reference to it."""
    settings.WEFT = {**settings.WEFT, "PAYLOAD_CODECS": []}  # same bytes, same blob
    with pytest.raises(RuntimeError), transaction.atomic():
        client.start("bo-wait", {"doc": BIG}, workflow_id="bo-2")
        raise RuntimeError("rolled back")
    (orphan,) = _files(blob_root)
    _age(blob_root, orphan, 7200)
    assert blobs.age_seconds("weft-payloads", orphan) >= 7200
    with pytest.raises(RuntimeError), transaction.atomic():
        client.start("bo-wait", {"doc": BIG}, workflow_id="bo-2")  # writes it again
        assert blobs.age_seconds("weft-payloads", orphan) < 600
        raise RuntimeError("rolled back too")
    assert _check("--delete-orphans", "--older-than", "3600")["deleted"] == []
    _age(blob_root, orphan, 7200)
    assert _check("--delete-orphans", "--older-than", "3600")["deleted"] == [orphan]


@pytest.mark.django_db(transaction=True)
def test_older_than_must_be_a_non_negative_number(blob_root):
    with pytest.raises(CommandError, match="older_than must be a number of seconds >= 0, got -1"):
        call_command("weft", "blobs", "check", "--delete-orphans", "--older-than", "-1")
