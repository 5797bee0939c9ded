"""The exported history format: one run, taken out of the database as JSON.

A history holds everything a replay reads (the run's input and journal, as
stored: payload codecs already applied) plus what an operator needs to
recognise it (the signals and updates the run received, its workflow name
and the patches its journal recorded). The format is documented in
``docs/howto/histories.md``; this module is its one definition.

Invariants:

* **Versioned.** ``format`` is ``HISTORY_FORMAT`` and ``version`` is
  ``HISTORY_VERSION``; a document of another format or version is refused,
  never guessed at.
* **Sealed.** ``checksum`` is ``"sha256:" + hex`` of the canonical JSON
  (sorted keys, no whitespace, UTF-8) of the document without its
  ``checksum`` key. A truncated file (invalid JSON), a missing field or an
  edited value is refused with the reason named, before anything replays.
* **Pure.** Nothing here reads or writes a database: building a document
  takes plain values, loading one takes a path or a dict.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from weft_django.engine.replay.events import Event

#: The ``format`` field of every exported history.
HISTORY_FORMAT: Final = "weft-history"
#: The ``version`` this code writes and reads; a change to the fields bumps it.
HISTORY_VERSION: Final = 1

#: The fields a version-1 document has (besides ``checksum``), with their JSON type.
_FIELDS: Final[dict[str, type | tuple[type, ...]]] = {
    "format": str,
    "version": int,
    "exported_at": str,
    "workflow": dict,
    "run": dict,
    "journal": list,
    "signals": list,
    "updates": list,
}
_RUN_FIELDS: Final = ("workflow_id", "run_id", "status", "input", "result", "error")
_ENTRY_FIELDS: Final = ("position", "kind", "command", "target", "result", "error")


class HistoryFormatError(ValueError):
    """A history document this code cannot trust: not JSON, another format or
    version, a missing field, or a checksum that does not match."""


def canonical_json(document: Mapping[str, Any]) -> bytes:
    """The bytes the checksum covers: sorted keys, no whitespace, UTF-8."""
    return json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def checksum_of(document: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of ``document`` without its ``checksum`` key."""
    content = {key: value for key, value in document.items() if key != "checksum"}
    return "sha256:" + hashlib.sha256(canonical_json(content)).hexdigest()


def seal(content: Mapping[str, Any]) -> dict[str, Any]:
    """``content`` (format, version and the fields) with its checksum added."""
    document = {key: value for key, value in content.items() if key != "checksum"}
    document["checksum"] = checksum_of(document)
    return document


def load_history(source: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """A verified history from a file path or an already parsed dict.

    Raises ``HistoryFormatError`` naming the file and the value at fault; a
    document that passes is safe to replay (every field present and typed,
    the checksum matching).
    """
    if isinstance(source, Mapping):
        where = "history"
        document: Any = dict(source)
    elif isinstance(source, str | os.PathLike):
        where = f"history file {os.fspath(source)!r}"
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise HistoryFormatError(f"{where} cannot be read: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise HistoryFormatError(f"{where} is not UTF-8 text: {exc}") from exc
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise HistoryFormatError(
                f"{where} is not valid JSON (truncated or damaged?): {exc.msg} at line "
                f"{exc.lineno} column {exc.colno} of {len(text)} characters"
            ) from exc
    else:
        raise HistoryFormatError(
            f"a history is a file path or a dict, got {type(source).__name__}: {source!r:.100}"
        )
    _verify(document, where)
    return document  # type: ignore[no-any-return]


def _verify(document: Any, where: str) -> None:
    if not isinstance(document, dict):
        raise HistoryFormatError(f"{where} is not a JSON object: {type(document).__name__}")
    if document.get("format") != HISTORY_FORMAT:
        raise HistoryFormatError(
            f"{where} has format {document.get('format')!r}, expected {HISTORY_FORMAT!r}"
        )
    version = document.get("version")
    if version != HISTORY_VERSION or isinstance(version, bool):
        raise HistoryFormatError(
            f"{where} has format version {version!r}; this code reads version {HISTORY_VERSION} "
            "(export it again with this release's `manage.py weft history export`)"
        )
    for name, kind in _FIELDS.items():
        if name not in document:
            raise HistoryFormatError(f"{where} has no {name!r} field")
        if not isinstance(document[name], kind):
            raise HistoryFormatError(
                f"{where}: field {name!r} is {type(document[name]).__name__}, "
                f"expected {getattr(kind, '__name__', kind)}"
            )
    recorded = document.get("checksum")
    if not isinstance(recorded, str):
        raise HistoryFormatError(f"{where} has no checksum (got {recorded!r})")
    expected = checksum_of(document)
    if recorded != expected:
        raise HistoryFormatError(
            f"{where} was changed after export: checksum {recorded!r} does not match its "
            f"content ({expected!r})"
        )
    _verify_parts(document, where)


def _verify_parts(document: dict[str, Any], where: str) -> None:
    name = document["workflow"].get("name")
    if not isinstance(name, str) or not name:
        raise HistoryFormatError(f"{where}: workflow.name is {name!r}, expected a workflow name")
    for field in _RUN_FIELDS:
        if field not in document["run"]:
            raise HistoryFormatError(f"{where}: run has no {field!r} field")
    for index, entry in enumerate(document["journal"]):
        if not isinstance(entry, dict) or any(f not in entry for f in _ENTRY_FIELDS):
            raise HistoryFormatError(
                f"{where}: journal entry {index} is {entry!r:.200}, expected an object with "
                f"{', '.join(_ENTRY_FIELDS)}"
            )
        if not isinstance(entry["position"], int) or isinstance(entry["position"], bool):
            raise HistoryFormatError(
                f"{where}: journal entry {index} has position {entry['position']!r}"
            )


def history_events(document: Mapping[str, Any]) -> list[Event]:
    """The journal of a verified history as the replay reads it, in position order."""
    entries = sorted(document["journal"], key=lambda entry: entry["position"])
    return [
        Event(e["position"], e["kind"], e["command"], e["target"], e["result"], e["error"])
        for e in entries
    ]


__all__ = [
    "HISTORY_FORMAT",
    "HISTORY_VERSION",
    "HistoryFormatError",
    "canonical_json",
    "checksum_of",
    "history_events",
    "load_history",
    "seal",
]
