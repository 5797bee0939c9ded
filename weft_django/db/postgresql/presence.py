"""The gone engines' look (PostgreSQL): one statement for ``ownership.presence``.

Invariant: an engine is gone only when no session of this database holds its presence
advisory lock, and the statement that finds it gone also marks its live record stopped,
so every watcher sees an engine another one marked.
"""

from __future__ import annotations


def gone_engines_sql(engines: str) -> str:
    """The gone engines (``ownership.presence``) of the engine table ``engines``: a live
    record (or one stopped since ``%(since)s``, so every watcher sees an engine another
    one marked), a presence key, and no granted advisory lock (``%(namespace)s``, key) in
    this database. ``objsubid = 2`` is the two-int4 form; ``classid`` and ``objid`` are
    oids, compared as int8. One statement: it also marks the live ones stopped at
    ``%(now)s`` and returns ``(engine_id, marked_now)``."""
    return f"""
WITH gone AS (
    SELECT e.engine_id, e.stopped_at
    FROM {engines} e
    WHERE e.presence_key IS NOT NULL
      AND e.engine_id <> %(me)s
      AND (e.stopped_at IS NULL OR e.stopped_at >= %(since)s)
      AND NOT EXISTS (
          SELECT 1 FROM pg_locks l
          WHERE l.locktype = 'advisory'
            AND l.granted
            AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND l.classid::int8 = %(namespace)s
            AND l.objid::int8 = e.presence_key
            AND l.objsubid = 2
      )
), marked AS (
    UPDATE {engines} r SET stopped_at = %(now)s
    FROM gone g
    WHERE r.engine_id = g.engine_id AND g.stopped_at IS NULL AND r.stopped_at IS NULL
    RETURNING r.engine_id
)
SELECT g.engine_id, g.engine_id IN (SELECT engine_id FROM marked) FROM gone g
"""


__all__ = ["gone_engines_sql"]
