"""The parsers of ``WEFT`` values: one function per shape a key may take.

Invariant protected: a parser either returns the typed value the engine
reads (durations as integer milliseconds, lists as tuples) or raises
``ValueError`` with a message that names ``WEFT[key]`` and the value -- for
any value at all, so ``manage.py check`` reports a hostile setting instead
of crashing on it. A structured value (``SCHEDULES``, ``QUEUES``,
``SEARCH_ATTRIBUTES``) whose entries are partly bad raises
``PartlyRefused``, which carries the entries that did parse and one finding
per bad entry. Every parser is called ``parse(key, value)``; the messages
are a contract (the tests and the docs quote them), so keep their wording.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple, cast

from weft_django.kernel.attribute_types import AttributeType
from weft_django.kernel.attribute_types import parse_declared as parse_search_attributes
from weft_django.kernel.durations import to_ms
from weft_django.kernel.queue_spec import QueueSpec, parse_queues
from weft_django.kernel.schedule_spec import ScheduleSpec, parse_declared

#: ``parse(key, value)``: the typed value, or ``ValueError`` naming ``WEFT[key]``.
Parser = Callable[[str, Any], Any]

#: The longest duration a setting may hold (100 years). Why a bound: every
#: duration is added to an engine-clock timestamp (a claim's expiry, a
#: retention cut-off), and the store keeps those below 2**53 ms; a larger
#: value would be accepted here and fail later, inside an engine.
MAX_SETTING_DURATION_MS = 100 * 365 * 24 * 3600 * 1000


class PartlyRefused(ValueError):
    """Some entries of a structured value are bad: ``findings`` holds one
    ``(problem kind, message)`` per bad entry (kind ``None``: the key's own
    kind) and ``parsed`` the entries that did parse, used meanwhile."""

    def __init__(self, parsed: Any, findings: Sequence[tuple[str | None, str]]) -> None:
        super().__init__("; ".join(message for _, message in findings))
        self.parsed = parsed
        self.findings = list(findings)


def duration_ms(key: str, value: object) -> int:
    """Seconds (int/float) or ``timedelta`` → integer ms, never 0 and at most
    ``MAX_SETTING_DURATION_MS``; every bad value is a ``ValueError`` naming
    ``WEFT[key]``."""
    try:
        ms = to_ms(value, f"WEFT[{key!r}]", allow_zero=False, type_error=ValueError)
    except OverflowError:  # a timedelta / float too large for the arithmetic
        ms = MAX_SETTING_DURATION_MS + 1
    if ms > MAX_SETTING_DURATION_MS:
        raise ValueError(
            f"WEFT[{key!r}] must be at most {MAX_SETTING_DURATION_MS // 1000} s (100 years), "
            f"got {value!r:.100}"
        )
    return ms


def optional_duration_ms(key: str, value: object) -> int | None:
    """``duration_ms``, or ``None`` for ``None`` (the feature is off)."""
    return None if value is None else duration_ms(key, value)


def choice(*allowed: str, prose: bool = False) -> Parser:
    """One of ``allowed``. The message lists them as ``'a', 'b'``, or with
    ``prose`` as ``"a", "b" or "c"``."""
    if prose:
        listed = ", ".join(f'"{a}"' for a in allowed[:-1]) + f' or "{allowed[-1]}"'
    else:
        listed = ", ".join(repr(a) for a in allowed)

    def parse(key: str, value: object) -> str:
        if value not in allowed:
            raise ValueError(f"WEFT[{key!r}] is {value!r}; it must be one of {listed}")
        return cast(str, value)

    return parse


def positive_int(key: str, value: object) -> int:
    """An ``int`` (not a ``bool``) above 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"WEFT[{key!r}] must be a positive integer, got {value!r}")
    return value


def int_at_least(minimum: int, meaning: str) -> Parser:
    """An ``int`` (not a ``bool``) of at least ``minimum``; the message says
    what the number counts (``meaning``)."""

    def parse(key: str, value: object) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
            return int(value)
        raise ValueError(
            f"WEFT[{key!r}] must be an integer of at least {minimum} ({meaning}), got {value!r}"
        )

    return parse


def boolean(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"WEFT[{key!r}] must be True or False, got {value!r}")
    return value


def optional_boolean(key: str, value: object) -> bool | None:
    """``True``, ``False`` or ``None`` (let the package decide)."""
    if value is None or isinstance(value, bool):
        return value
    raise ValueError(f"WEFT[{key!r}] must be True, False or None, got {value!r}")


def dotted_paths(what: str) -> Parser:
    """A list or tuple of non-empty strings, as a tuple; the message calls
    them ``what``."""

    def parse(key: str, value: object) -> tuple[str, ...]:
        if not isinstance(value, list | tuple) or not all(isinstance(p, str) and p for p in value):
            raise ValueError(f"WEFT[{key!r}] must be a list of {what}, got {value!r}")
        return tuple(value)

    return parse


class PayloadStorage(NamedTuple):
    """``WEFT["PAYLOAD_STORAGE"]``: the ``STORAGES`` alias and the size above
    which a stored payload goes there."""

    storage: str
    threshold_bytes: int


#: Payloads above this are refused even with ``PAYLOAD_STORAGE`` on (100 MB).
MAX_PAYLOAD_BYTES_CEILING: Final[int] = 100 * 1024 * 1024


def strings(key: str, value: object) -> tuple[str, ...]:
    """A list or tuple of strings (possibly empty), as a tuple."""
    if not isinstance(value, list | tuple) or not all(isinstance(p, str) for p in value):
        raise ValueError(f"WEFT[{key!r}] must be a list of strings, got a {type(value).__name__}")
    return tuple(value)


def payload_storage(key: str, value: object) -> PayloadStorage | None:
    """``None`` or ``{"STORAGE": alias, "THRESHOLD_BYTES": n}`` (n defaults to 65536)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("STORAGE"), str):
        raise ValueError(
            f'WEFT[{key!r}] must be None or {{"STORAGE": "<alias in STORAGES>", '
            f'"THRESHOLD_BYTES": 65536}}, got {value!r}'
        )
    unknown = sorted(set(value) - {"STORAGE", "THRESHOLD_BYTES"})
    if unknown:
        raise ValueError(f"WEFT[{key!r}] has unknown keys {unknown}")
    threshold = value.get("THRESHOLD_BYTES", 65536)
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise ValueError(
            f'WEFT[{key!r}]["THRESHOLD_BYTES"] must be a positive integer, got {threshold!r}'
        )
    return PayloadStorage(value["STORAGE"], threshold)


def database_alias(key: str, value: object) -> str:
    """A non-empty string (whether it names a database is ``weft.E015``'s job)."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"WEFT[{key!r}] must be a database alias, got {value!r}")
    return value


def schedules(key: str, value: object) -> tuple[ScheduleSpec, ...]:
    specs, findings = parse_declared(value)
    if findings:
        raise PartlyRefused(specs, findings)
    return specs


def queues(key: str, value: object) -> dict[str, QueueSpec]:
    specs, messages = parse_queues(value)
    if messages:
        raise PartlyRefused(specs, [(None, message) for message in messages])
    return specs


def search_attributes(key: str, value: object) -> dict[str, AttributeType]:
    declared, findings = parse_search_attributes(value)
    if findings:
        raise PartlyRefused(declared, findings)
    return declared


__all__ = [
    "MAX_SETTING_DURATION_MS",
    "Parser",
    "PartlyRefused",
    "boolean",
    "choice",
    "database_alias",
    "dotted_paths",
    "duration_ms",
    "int_at_least",
    "optional_boolean",
    "optional_duration_ms",
    "positive_int",
    "queues",
    "schedules",
    "search_attributes",
]
