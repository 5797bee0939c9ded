"""What a bulk admin action tells the operator, and what it leaves in the history.

Why one summary: an action over 1,674 runs that prints 1,674 messages hides
the three that did not happen. ``ActionReport`` gathers every outcome and
says it once -- how many were acted on, and each reason some were not, with
a few of their ids -- so the exceptions are what stands out.

Why ``LogEntry``: the actions are writes by a person (rotations, cancels,
settlements). Each object an action changed gets a row in Django's admin
history (``django.contrib.admin.models.LogEntry``, one bulk insert), whose
message names the action, so "who cancelled this run" has an answer on the
object's History page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.http import HttpRequest

from weft_django.errors import AsyncActivityTokenError, InvalidTransitionError, WeftError
from weft_django.models import TERMINAL_STATUSES

SHOWN_IDS = 10
"""How many ids a summary names per group before it says "and N more"."""


def _names(ids: list[str]) -> str:
    shown = ", ".join(ids[:SHOWN_IDS])
    more = len(ids) - SHOWN_IDS
    return shown + (f" and {more:,} more" if more > 0 else "")


def refusal_reason(exc: WeftError) -> str:
    """What a refused object "was", grouped: "already finished", "parked",
    "already settled" ... else the error's code ("refused (invalid_payload)")."""
    if isinstance(exc, InvalidTransitionError):
        return "already finished" if exc.status in TERMINAL_STATUSES else exc.status
    if isinstance(exc, AsyncActivityTokenError):
        return "already settled" if exc.kind == "used" else "no longer stored"
    return f"refused ({exc.code})"


@dataclass
class ActionReport:
    """The outcomes of one bulk action: objects acted on, and the rest by reason."""

    verb: str
    """Past tense, lower case: ``cancelled``, ``force released``."""
    noun: str
    """Singular: ``run``, ``holder``, ``schedule``."""
    plural: str = ""
    """When not ``noun + "s"``."""
    done: list[Any] = field(default_factory=list)
    done_ids: list[str] = field(default_factory=list)
    refused: dict[str, list[str]] = field(default_factory=dict)

    def ok(self, obj: Any, label: str) -> None:
        self.done.append(obj)
        self.done_ids.append(label)

    def refuse(self, reason: str, label: str) -> None:
        """``label`` was not acted on; ``reason`` completes "3 were ..."."""
        self.refused.setdefault(reason, []).append(label)

    def summary(self) -> str:
        """``Cancelled 1,674 runs; 3 were already finished: sw-1, sw-2, sw-3.``"""
        n = len(self.done)
        noun = self.noun if n == 1 else (self.plural or f"{self.noun}s")
        head = f"{_capital(self.verb)} {n:,} {noun}"
        if 0 < n <= SHOWN_IDS:
            head += f" ({', '.join(self.done_ids)})"
        parts = [head]
        for reason, ids in self.refused.items():
            were = "was" if len(ids) == 1 else "were"
            parts.append(f"{len(ids):,} {were} {reason}: {_names(ids)}")
        return "; ".join(parts) + "."

    def send(self, request: HttpRequest, action: str) -> None:
        """The one message, and a ``LogEntry`` per object acted on."""
        level = messages.WARNING if self.refused else messages.SUCCESS
        messages.add_message(request, level, self.summary())
        if self.done and request.user.is_authenticated:
            LogEntry.objects.log_actions(
                user_id=request.user.pk,
                queryset=self.done,
                action_flag=CHANGE,
                change_message=f"{_capital(self.verb)} by the admin action “{action}”.",
            )


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


__all__ = ["SHOWN_IDS", "ActionReport", "refusal_reason"]
