"""The run page's bounded parts: the journal page asked for, the error as a
traceback, and what the run waits for.

Why a module: the run page must stay the same size whatever the run's
history (a 3,000-step run was 5.9 MB, its journal shown twice).
The journal is shown once, one page at a time (``?journal_page=``); the
admin's read-only field callables see only the run, so the page number
asked for rides in a context variable that ``change_view`` sets for the
request it serves (per thread and per task, never shared between requests).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from weft_django.admin.base import json_text
from weft_django.admin.timeline import JOURNAL_PAGE_PARAM, journal_timeline
from weft_django.engine.runs.waits import run_waits
from weft_django.models import WorkflowRun

_journal_page: contextvars.ContextVar[int] = contextvars.ContextVar(
    "weft_admin_journal_page", default=1
)

_PRE = '<pre style="margin:0;white-space:pre-wrap">{}</pre>'


def requested_page(request: HttpRequest) -> int:
    """The ``?journal_page=`` asked for (1 when absent or not a positive integer)."""
    raw = request.GET.get(JOURNAL_PAGE_PARAM, "")
    return int(raw) if raw.isdigit() and 0 < int(raw) < 2**31 else 1


@contextmanager
def journal_page(page: int) -> Iterator[None]:
    """Serve one request's run page with journal page ``page``."""
    token = _journal_page.set(page)
    try:
        yield
    finally:
        _journal_page.reset(token)


def journal_html(run: WorkflowRun) -> str:
    """The journal page this request asked for (the journal's one copy)."""
    return journal_timeline(run, _journal_page.get())


def error_html(error: Any) -> SafeString:
    """A recorded error as people read one: ``type: message``, the traceback with
    its real line breaks in a ``<pre>``, and any other fields as JSON.

    The stored record stays JSON (the API serves it as is); only the admin
    unfolds ``traceback``, so ``\\n`` never shows as two characters.
    """
    if error is None:
        return mark_safe("-")
    if not isinstance(error, dict):
        return format_html(_PRE, json_text(error))
    parts: list[SafeString] = []
    head = ": ".join(str(error[k]) for k in ("type", "message") if error.get(k) not in (None, ""))
    if head:
        parts.append(format_html("<p><strong>{}</strong></p>", head))
    traceback = error.get("traceback")
    if isinstance(traceback, str) and traceback:
        parts.append(format_html(_PRE, traceback))
    rest = {k: v for k, v in error.items() if k not in ("type", "message", "traceback")}
    if rest:
        parts.append(format_html(_PRE, json_text(rest)))
    return mark_safe("".join(parts)) if parts else format_html(_PRE, json_text(error))


def waits_html(run: WorkflowRun) -> SafeString:
    """What the run waits for, one line per wait (``engine.run_waits``)."""
    waits = run_waits(run)
    if not waits:
        return mark_safe("-")
    items = format_html_join("", "<li><code>{}</code> {}</li>", ((w.kind, w.text) for w in waits))
    return format_html('<ul style="margin:0;padding-left:1.2em">{}</ul>', items)


__all__ = ["error_html", "journal_html", "journal_page", "requested_page", "waits_html"]
