"""SQLite, except that ``features.supports_transactions`` is ``False``.

Why: SPEC §4.3's capability gate must judge a database on what its backend
says it can do (``connection.features.supports_transactions``), not on its
ENGINE string; a backend that is SQLite by name but declares no transactions
must be refused.
"""

from __future__ import annotations

from django.db.backends.sqlite3 import base, features


class DatabaseFeatures(features.DatabaseFeatures):
    supports_transactions = False


class DatabaseWrapper(base.DatabaseWrapper):
    features_class = DatabaseFeatures
