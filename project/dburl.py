"""Turn ``DATABASE_URL`` into a Django ``DATABASES`` entry.

Why hand-written: the example project needs exactly two schemes (SQLite and
PostgreSQL) and the options weft-django asks for on each; a dependency for
that would be one more thing a newcomer installs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

#: SQLite options the embedded default needs: ``BEGIN IMMEDIATE`` so writers
#: serialise at BEGIN instead of failing with "database is locked" on upgrade,
#: WAL so readers never block the writer, and a generous busy timeout.
SQLITE_OPTIONS: dict[str, Any] = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}


def sqlite_database(path: Path | str) -> dict[str, Any]:
    """The Django entry for a file-backed SQLite database at ``path``."""
    path = Path(path)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": dict(SQLITE_OPTIONS),
        # A file-backed test database so that engine processes spawned by
        # the tests open the same file as the test process.
        "TEST": {"NAME": str(path.with_name("test_" + path.name))},
    }


def parse_database_url(url: str, base_dir: Path) -> dict[str, Any]:
    """Parse ``sqlite:///path`` or ``postgres://user:pw@host:port/name``."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in {"sqlite", "sqlite3"}:
        # sqlite:///rel.sqlite3 -> "rel.sqlite3"; sqlite:////abs/x -> "/abs/x"
        raw = unquote(parts.path)[1:]
        path = Path(raw) if Path(raw).is_absolute() else base_dir / raw
        return sqlite_database(path)
    if scheme in {"postgres", "postgresql", "pgsql"}:
        name = unquote(parts.path.lstrip("/")) or "weft"
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        entry: dict[str, Any] = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": unquote(parts.username or "postgres"),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "127.0.0.1",
            "PORT": str(parts.port or 5432),
            "OPTIONS": query,
            "TEST": {"NAME": query.pop("test_name", None) or f"test_{name}"},
        }
        return entry
    raise ValueError(
        f"DATABASE_URL scheme {scheme!r} is not supported; use sqlite:///path or postgres://..."
    )
