"""The warnings page: every ``WeftWarning`` and the structured log event it emits."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .examples import example_instance, signature
from .markdown import first_paragraph, md, page, table


@contextmanager
def _captured_ownership_log(
    name: str = "weft_django.ownership",
) -> Iterator[list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []

    class _Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    log = logging.getLogger(name)
    handler = _Capture(logging.WARNING)
    old_propagate, old_level = log.propagate, log.level
    log.addHandler(handler)
    log.propagate = False
    log.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield records
    finally:
        log.removeHandler(handler)
        log.propagate, log.level = old_propagate, old_level


def _warning_events() -> dict[str, str]:
    """Warning class name -> the ``event`` of its structured log record."""
    from weft_django import warnings as weft_warnings

    events: dict[str, str] = {}
    ownership = "weft_django.ownership"
    helpers: list[tuple[Callable[..., Any], tuple[Any, ...], str]] = [
        (weft_warnings.warn_claim_lost, ("order-o-1",), ownership),
        (weft_warnings.warn_wake_discarded, ("order-o-1", "sleep"), ownership),
        (weft_warnings.warn_lease_lost, ("engine-a",), ownership),
        (weft_warnings.warn_activity_abandoned, ("charge_card", "timed out"), "weft_django.engine"),
    ]
    for helper, args, logger_name in helpers:
        with _captured_ownership_log(logger_name) as records:
            instance = helper(*args)
        for record in records:
            payload = getattr(record, "weft", {})
            if isinstance(payload, dict) and "event" in payload:
                events[type(instance).__name__] = str(payload["event"])
    return events


def render_warnings() -> str:
    from weft_django.warnings import WAKE_KINDS, WARNING_CLASSES

    events = _warning_events()
    rows = [
        (
            f"[`{cls.__name__}`](#{cls.__name__.lower()})",
            ", ".join(f"`{f}`" for f in cls._fields),
            f"`{events[cls.__name__]}`" if cls.__name__ in events else "",
            first_paragraph(cls.__doc__),
        )
        for cls in WARNING_CLASSES
    ]
    sections = []
    for cls in WARNING_CLASSES:
        lines = [f"### {cls.__name__}\n", f"`{signature(cls)}`\n", md(cls.__doc__) + "\n"]
        example = example_instance(cls)
        if example is not None:
            lines.append(f"Example message:\n\n> {example}\n")
        sections.append("\n".join(lines))
    return page(
        "Warnings reference",
        f"""
        Losing a claim or discarding a stale wake is *correct* behaviour under
        fenced ownership — another engine took over and this one must stop — so
        it does not raise. Each event is reported twice:

        * `warnings.warn(<instance>)` with a subclass of
          `weft_django.warnings.WeftWarning` (itself a `RuntimeWarning`) that
          carries its fields as attributes (`pytest.warns` friendly);
        * a WARNING on the `weft_django.ownership` logger (`weft_django.engine`
          for `WeftActivityAbandonedWarning`) whose record carries
          `record.weft = {{...fields, "event": <event>}}` for structured logs.

        They are expected in multi-engine operation. A project running pytest
        with `-W error` adds:

        ```toml
        [tool.pytest.ini_options]
        filterwarnings = ["ignore::weft_django.warnings.WeftWarning"]
        ```

        Wake kinds (`wake_kind`): {", ".join(f"`{k}`" for k in WAKE_KINDS)}.
        """,
        "## Summary\n",
        table(("warning", "fields", "log event", "when"), rows),
        "## Warnings\n",
        *sections,
    )
