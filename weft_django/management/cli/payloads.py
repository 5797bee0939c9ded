"""``weft reencrypt [--batch N]`` and ``weft blobs check``.

``reencrypt`` rewrites every stored payload that is not under the current
codecs and key (``engine.payload_rows.reencrypt``: conditioned on the stored
value it read, so a live owner's write is never overwritten; rerunning it
resumes, as rows already current are skipped). ``blobs check`` lists blobs
no row refers to (orphans) and references whose blob is missing (dangling);
``--delete-orphans`` deletes the orphans older than ``--older-than``.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import CommandParser

from weft_django.engine.payload_rows import (
    ORPHAN_GRACE_S,
    blob_problems,
    delete_orphans,
    reencrypt,
)

from .console import Console, Subcommand


def _add_reencrypt(parser: CommandParser) -> None:
    parser.add_argument(
        "--batch", type=int, default=500, metavar="N", help="rows read per statement (500)"
    )


def _progress_bar(stream: Any) -> Any:
    def show(done: int, total: int) -> None:
        width = 30
        filled = width if total == 0 else width * done // total
        stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} payloads")
        stream.flush()

    return show


def _reencrypt(options: dict[str, Any], console: Console) -> None:
    batch = int(options.get("batch") or 500)
    if batch < 1:
        raise ValueError(f"--batch must be a positive integer, got {batch}")
    show = None if console.json_mode else _progress_bar(sys.stderr)
    report = reencrypt(batch=batch, progress=show)
    if show is not None:
        sys.stderr.write("\n")
    data = {
        "action": "reencrypt",
        "rewritten": report.rewritten,
        "current": report.current,
        "unreadable": report.unreadable,
        "raced": report.raced,
    }
    text = (
        f"reencrypt: {report.rewritten} rewritten, {report.current} already current, "
        f"{report.unreadable} unreadable, {report.raced} changed while read (read again)"
    )
    console.emit(data, text)


def _add_blobs(parser: CommandParser) -> None:
    parser.add_argument("action", choices=["check"], help="check: orphans and dangling references")
    parser.add_argument(
        "--delete-orphans",
        action="store_true",
        help="delete the orphans (blobs of rolled-back writes) older than --older-than",
    )
    parser.add_argument(
        "--older-than",
        type=float,
        default=ORPHAN_GRACE_S,
        metavar="SECONDS",
        help=(
            f"with --delete-orphans: keep orphans younger than this ({ORPHAN_GRACE_S:.0f}; "
            "longer than any transaction that writes payloads)"
        ),
    )


def _blobs(options: dict[str, Any], console: Console) -> None:
    deleted: list[str] = []
    if options.get("delete_orphans"):
        deleted, _kept = delete_orphans(float(options.get("older_than", ORPHAN_GRACE_S)))
    problems = list(blob_problems())
    lines = [f"deleted orphan: {digest}" for digest in deleted]
    lines += [f"{kind}: {digest}" for kind, digest in problems]
    data: dict[str, Any] = {
        "orphans": [d for k, d in problems if k == "orphan"],
        "dangling": [d for k, d in problems if k == "dangling"],
    }
    if options.get("delete_orphans"):
        data["deleted"] = deleted
    console.emit(data, "\n".join(lines or ["blobs: no problem found"]))


REENCRYPT = Subcommand(
    "reencrypt",
    "rewrite stored payloads under the current codecs and key",
    __doc__ or "",
    _add_reencrypt,
    _reencrypt,
)
BLOBS = Subcommand("blobs", "check the large-payload storage", __doc__ or "", _add_blobs, _blobs)
