"""Moved to ``weft_django.db.single_row``; kept for imports."""

from weft_django.db.single_row import insert_row, update_by_pk

__all__ = ["insert_row", "update_by_pk"]
