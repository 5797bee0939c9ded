"""What a workflow body runs inside: no database, and JSON-only values.

Why: a body is replayed from its journal, so it must take the same path
every time. ORM work would read state that changed since the first run, so
the body runs with every connection's queries refused
(``database_refused``); every value sent into the generator takes the JSON
round trip first (``json_copy``), so a ``datetime`` is the same string live
and on replay (and a dataclass or pydantic model the same plain ``dict``:
``payload_types``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connections

from weft_django.engine.workflow.body import is_coroutine, stepping
from weft_django.engine.workflow.payload_types import to_json_value


class WorkflowDatabaseAccessError(RuntimeError):
    """A workflow body touched the database (ORM work belongs in activities)."""


def _refuse_database(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    raise WorkflowDatabaseAccessError(
        "Database access from a workflow body is not allowed: it would not be replayed "
        "deterministically. Move ORM work into an @activity and ctx.run() it. "
        f"(query: {sql[:80]!r})"
    )


@contextlib.contextmanager
def database_refused() -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for alias in connections:
            stack.enter_context(connections[alias].execute_wrapper(_refuse_database))
        yield


@contextlib.contextmanager
def body_scope(coroutine: bool) -> Iterator[None]:
    """Database refused; for a coroutine body also ``BODY_LOOP`` running, so
    only ctx commands can be awaited (``engine.workflow.body``)."""
    if not coroutine:
        with database_refused():
            yield
        return
    with database_refused(), stepping():
        yield


def close_body(gen: Any, *, limit: int = 16) -> None:
    """Close a dropped workflow generator quietly, with database access refused.

    Why: cleanup may ``yield`` inside ``finally`` (a cancel with a grace), so
    the ``GeneratorExit`` of a close makes the body yield again, which Python
    reports as "generator ignored GeneratorExit" when it closes the
    generator itself. Nothing of a dropped replay is ever committed, so the
    body is closed here as often as it yields again (at most ``limit``).
    """
    if gen is None or not hasattr(gen, "close"):
        return
    for _ in range(limit):
        try:
            with body_scope(is_coroutine(gen)):
                gen.close()
            return
        except RuntimeError:
            continue  # it yielded in a finally: close again at that yield
        except BaseException:
            return


def json_copy(value: Any) -> Any:
    """The JSON round trip every value takes before it enters the generator."""
    return json.loads(json.dumps(to_json_value(value), cls=DjangoJSONEncoder))


__all__ = [
    "WorkflowDatabaseAccessError",
    "body_scope",
    "close_body",
    "database_refused",
    "json_copy",
]
