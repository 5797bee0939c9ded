"""Stored payloads across every payload column: re-encryption and blob bookkeeping.

Invariants protected:

* ``reencrypt`` changes how a payload is stored, never what it is: each row
  is decoded with every configured key and written back under the current
  one only if its column still holds what was read (``db.payload_rows.swap``),
  so a live owner's concurrent write always wins (the row is read again).
  Rows already under the current codecs are left alone, so a run that was
  interrupted resumes by running again.
* A blob is deleted only when no payload column refers to it any more
  (``release_blobs``): two runs storing one large value share one blob.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.db.models import Q
from django.db.models.fields.json import KeyTextTransform

from weft_django.codecs import blobs
from weft_django.codecs.stored import (
    MARKER,
    UnreadablePayload,
    active_codecs,
    blob_digest,
    decode_payload,
    encode_payload,
    is_envelope,
    stored_bytes,
)
from weft_django.conf import get_settings
from weft_django.db import payload_rows
from weft_django.models.fields import PayloadField


def payload_columns() -> list[tuple[Any, str]]:
    """Every ``(model, column)`` that holds a payload."""
    found = []
    for model in apps.get_app_config("weft").get_models():
        for field in model._meta.concrete_fields:
            if isinstance(field, PayloadField):
                found.append((model, field.name))
    return found


def is_current(stored: Any) -> bool:
    """Whether ``stored`` is what the current codecs (and keys) would write."""
    codecs = active_codecs()
    if not codecs:
        return not is_envelope(stored) or stored.get(MARKER) == []
    if not is_envelope(stored) or stored.get(MARKER) != [c.name for c in codecs]:
        return False
    check = getattr(codecs[-1], "is_current", None)
    if check is None:
        return True
    try:
        return bool(check(stored_bytes(stored)))
    except ValueError:
        return False


@dataclass
class ReencryptReport:
    rewritten: int = 0
    current: int = 0
    unreadable: int = 0
    raced: int = 0


def reencrypt(
    batch: int = 500, progress: Callable[[int, int], None] | None = None
) -> ReencryptReport:
    """Rewrite every stored payload not under the current codecs and key."""
    db = get_settings().database
    columns = payload_columns()
    totals = [
        model._default_manager.using(db).filter(**{f"{c}__isnull": False}).count()
        for model, c in columns
    ]
    total, done = sum(totals), 0
    report = ReencryptReport()
    for model, column in columns:
        field = model._meta.get_field(column)
        after: Any = None
        while True:
            rows = payload_rows.scan(model, column, after, batch, db)
            if not rows:
                break
            for pk, text in rows:
                after = pk
                for _attempt in range(3):
                    stored = json.loads(text)
                    if is_current(stored):
                        report.current += 1
                        break
                    value = decode_payload(stored, field.payload_context)
                    if isinstance(value, UnreadablePayload):
                        report.unreadable += 1
                        break
                    new = encode_payload(value, field.payload_context)
                    if payload_rows.swap(model, column, pk, text, new, db):
                        report.rewritten += 1
                        old_blob = blob_digest(stored)
                        if old_blob is not None and old_blob != blob_digest(new):
                            release_blobs([old_blob])
                        break
                    report.raced += 1  # changed since read: read it again
                    fresh = payload_rows.read(model, column, pk, db)
                    if fresh is None:
                        break
                    text = fresh
                done += 1
            if progress is not None:
                progress(done, total)
    return report


def referenced_blobs() -> set[str]:
    """Every blob digest some payload column refers to."""
    db = get_settings().database
    found: set[str] = set()
    for model, column in payload_columns():
        rows = model._default_manager.using(db).filter(**{f"{column}__has_key": "blob"})
        found.update(_digests(rows, column))
    return found


def _digests(rows: Any, column: str) -> set[str]:
    """The ``blob`` key of each row's stored envelope (read as text: no decoding)."""
    values = rows.values_list(KeyTextTransform("blob", column), flat=True)
    return {str(v) for v in values if isinstance(v, str) and v}


def blobs_of_runs(run_ids: Iterable[Any]) -> set[str]:
    """The blobs the payloads of ``run_ids`` (and their rows) refer to."""
    settings = get_settings()
    if settings.payload_storage is None:
        return set()
    db = settings.database
    ids = list(run_ids)
    found: set[str] = set()
    for model, column in payload_columns():
        key = "pk__in" if model._meta.model_name == "workflowrun" else "run_id__in"
        if key == "run_id__in" and not any(f.name == "run" for f in model._meta.fields):
            continue
        rows = model._default_manager.using(db).filter(
            Q(**{key: ids}) & Q(**{f"{column}__has_key": "blob"})
        )
        found.update(_digests(rows, column))
    return found


def release_blobs(digests: Iterable[str]) -> int:
    """Delete those of ``digests`` no payload column refers to; how many went."""
    storage = get_settings().payload_storage
    wanted = set(digests)
    if storage is None or not wanted:
        return 0
    gone = wanted - referenced_blobs()
    for digest in gone:
        blobs.delete(storage.storage, digest)
    return len(gone)


def blob_problems() -> Iterator[tuple[str, str]]:
    """``("orphan", digest)`` for a stored blob no row refers to and
    ``("dangling", digest)`` for a reference whose blob is missing."""
    storage = get_settings().payload_storage
    referenced = referenced_blobs()
    stored = set(blobs.listed(storage.storage)) if storage is not None else set()
    for digest in sorted(stored - referenced):
        yield "orphan", digest
    for digest in sorted(referenced - stored):
        yield "dangling", digest


#: ``--delete-orphans`` keeps an orphan younger than this (seconds): a blob
#: is written before its row's transaction commits, so a young one may
#: belong to a transaction still open.
ORPHAN_GRACE_S = 3600.0


def delete_orphans(older_than_s: float = ORPHAN_GRACE_S) -> tuple[list[str], list[str]]:
    """Delete the orphan blobs last written more than ``older_than_s`` ago;
    ``(deleted, kept)`` digests (kept: too young, or of unknown age).

    Orphans are what a rolled-back write leaves (``codecs.blobs``: blobs are
    written before COMMIT so that a committed row never refers to a missing
    blob). The references are read again after the ages, so a blob a
    transaction committed meanwhile is kept.
    """
    if isinstance(older_than_s, bool) or not 0 <= older_than_s < float("inf"):
        raise ValueError(f"older_than must be a number of seconds >= 0, got {older_than_s!r}")
    storage = get_settings().payload_storage
    if storage is None:
        return [], []
    orphans = [d for kind, d in blob_problems() if kind == "orphan"]
    aged = {d: blobs.age_seconds(storage.storage, d) for d in orphans}
    old = {d for d, age in aged.items() if age is not None and age >= older_than_s}
    old -= referenced_blobs()
    for digest in sorted(old):
        blobs.delete(storage.storage, digest)
    return sorted(old), sorted(set(orphans) - old)


__all__ = [
    "ORPHAN_GRACE_S",
    "ReencryptReport",
    "blob_problems",
    "blobs_of_runs",
    "delete_orphans",
    "is_current",
    "payload_columns",
    "reencrypt",
    "referenced_blobs",
    "release_blobs",
]
