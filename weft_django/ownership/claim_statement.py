"""Moved to ``weft_django.db.postgresql`` (the statement) and
``weft_django.ownership.batch.try_claim_statement`` (the shape); kept for imports."""

from __future__ import annotations

from collections.abc import Sequence

from weft_django import db as store
from weft_django.ownership import batch
from weft_django.ownership.ops import Condition, Write


def try_claim_statement(conds: Sequence[Condition], ops: Sequence[Write], db: str) -> bool | None:
    """Run a bare claim transition as one statement; ``None`` = not that shape."""
    return batch.try_claim_statement(store.ops(db), conds, ops, db)


__all__ = ["try_claim_statement"]
