"""``WEFT["SEARCH_ATTRIBUTES"]``: the declared search attributes and their types.

Why declared, with a type (as Temporal's search attributes are): a filter
``amount>=100`` is only meaningful when ``amount`` is always a number, and a
typed column (``RunSearchAttribute.int_value``, ...) is what lets the
database answer it from an index. So a name is declared once with one of
``TYPES``; a body upserting an undeclared name or a value of another type is
refused at the call, and a filter naming either is refused before any query.

Pure: no database, no Django beyond ``timezone`` helpers. ``conf`` validates
the setting with ``parse_declared`` (system checks ``weft.E045``-``E047``);
``check_value`` guards what a body upserts, ``parse_text`` reads what a query
string or a command line gives.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final, Literal

from django.utils import timezone
from django.utils.dateparse import parse_datetime

AttributeType = Literal["str", "int", "float", "bool", "datetime"]
TYPES: Final[tuple[AttributeType, ...]] = ("str", "int", "float", "bool", "datetime")
AttributeValue = str | int | float | bool | datetime

#: The column of ``RunSearchAttribute`` each type is stored in.
COLUMNS: Final[dict[str, str]] = {
    "str": "str_value",
    "int": "int_value",
    "float": "float_value",
    "bool": "bool_value",
    "datetime": "datetime_value",
}
#: Types whose values have an order (range filters ``>=``, ``<``, ...).
ORDERED: Final[frozenset[str]] = frozenset({"int", "float", "datetime"})

NAME_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_STR_LENGTH: Final = 255
#: A declared set larger than this is a design smell, not a search index.
MAX_ATTRIBUTES: Final = 100
#: The 64-bit range of ``int_value`` (a ``BigIntegerField``).
INT_MIN, INT_MAX = -(2**63), 2**63 - 1

_BOOL_TEXT: Final[dict[str, bool]] = {
    "true": True,
    "false": False,
    "1": True,
    "0": False,
    "yes": True,
    "no": False,
}


def storable_text(value: str) -> bool:
    """No NUL character and no lone surrogate: a text column of PostgreSQL
    (and a UTF-8 encoder) refuses them."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_declared(value: object) -> tuple[dict[str, AttributeType], list[tuple[str, str]]]:
    """The declared ``{name: type}`` and every problem as ``(kind, message)``.

    Kinds: ``bad-search-attributes`` (not a dict, or too many),
    ``bad-search-attribute-name``, ``bad-search-attribute-type``.
    """
    problems: list[tuple[str, str]] = []
    if value is None:
        return {}, problems
    if not isinstance(value, dict):
        problems.append(
            (
                "bad-search-attributes",
                "WEFT['SEARCH_ATTRIBUTES'] must be a dict of name -> type "
                f"({', '.join(TYPES)}), got {value!r:.100}",
            )
        )
        return {}, problems
    if len(value) > MAX_ATTRIBUTES:
        problems.append(
            (
                "bad-search-attributes",
                f"WEFT['SEARCH_ATTRIBUTES'] declares {len(value)} attributes; "
                f"at most {MAX_ATTRIBUTES} are allowed",
            )
        )
    declared: dict[str, AttributeType] = {}
    for name, kind in value.items():
        if not isinstance(name, str) or not NAME_RE.match(name):
            problems.append(
                (
                    "bad-search-attribute-name",
                    f"WEFT['SEARCH_ATTRIBUTES'] key {name!r:.100} is not a valid attribute "
                    "name (a letter or _, then letters, digits or _; at most 64 characters)",
                )
            )
            continue
        if kind not in TYPES:
            problems.append(
                (
                    "bad-search-attribute-type",
                    f"WEFT['SEARCH_ATTRIBUTES'][{name!r}] is {kind!r:.100}; "
                    f"it must be one of {', '.join(repr(t) for t in TYPES)}",
                )
            )
            continue
        declared[name] = kind
    return declared, problems


def check_value(name: str, kind: str, value: object) -> AttributeValue:
    """``value`` if it fits type ``kind`` (an ``int`` is a ``float`` too, a
    ``bool`` is never an ``int``); ``TypeError``/``ValueError`` naming it."""
    where = f"search attribute {name!r} ({kind})"
    if kind == "str":
        if not isinstance(value, str):
            raise TypeError(f"{where} takes a str, got {value!r:.100}")
        if not storable_text(value):
            raise ValueError(f"{where} must not contain NUL or lone surrogate characters")
        if len(value) > MAX_STR_LENGTH:
            raise ValueError(
                f"{where} takes at most {MAX_STR_LENGTH} characters, got {len(value)}: "
                f"{value!r:.60}..."
            )
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"{where} takes a bool, got {value!r:.100}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{where} takes an int, got {value!r:.100}")
        if not INT_MIN <= value <= INT_MAX:
            raise ValueError(f"{where} must fit in 64 bits, got {value!r}")
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{where} takes a float (or an int), got {value!r:.100}")
        number = float(value)
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError(f"{where} must be a finite number, got {value!r}")
        return number
    if kind == "datetime":
        if not isinstance(value, datetime):
            raise TypeError(f"{where} takes a datetime, got {value!r:.100}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{where} takes an aware datetime (with a time zone), got {value!r}")
        try:
            # In UTC: PostgreSQL refuses offsets past 15:59, and values compare in UTC.
            return value.astimezone(UTC)
        except OverflowError:
            raise ValueError(f"{where} is out of range in UTC, got {value!r}") from None
    raise TypeError(f"search attribute {name!r} has unknown type {kind!r}")


def parse_text(name: str, kind: str, text: str) -> AttributeValue:
    """``text`` (a query string's or a command line's) read as type ``kind``;
    ``ValueError`` naming the name and the text. A datetime without an offset
    is read in the current time zone (as the API's other datetimes are)."""
    where = f"search attribute {name!r} ({kind})"
    if kind == "str":
        return check_value(name, kind, text)
    if kind == "bool":
        parsed = _BOOL_TEXT.get(text.strip().lower())
        if parsed is None:
            raise ValueError(f"{where} takes true or false, got {text!r:.100}")
        return parsed
    if kind == "int":
        try:
            number = int(text.strip(), 10)
        except ValueError:
            raise ValueError(f"{where} takes an integer, got {text!r:.100}") from None
        return check_value(name, kind, number)
    if kind == "float":
        try:
            real = float(text.strip())
        except ValueError:
            raise ValueError(f"{where} takes a number, got {text!r:.100}") from None
        return check_value(name, kind, real)
    if kind == "datetime":
        return parse_moment(text, where)
    raise ValueError(f"search attribute {name!r} has unknown type {kind!r}")


def parse_moment(text: str, where: str) -> datetime:
    """An ISO 8601 datetime (naive: the current time zone); ``ValueError`` naming ``where``."""
    try:
        moment = parse_datetime(text.strip())
    except ValueError:
        moment = None
    if moment is None:
        raise ValueError(f"{where} takes an ISO 8601 datetime, got {text!r:.100}")
    try:
        if timezone.is_naive(moment):
            moment = timezone.make_aware(moment)
        # In UTC: PostgreSQL refuses offsets past 15:59, and values compare in UTC.
        return moment.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValueError(f"{where}: {text!r:.100} is out of range") from None


def to_json(kind: str, value: AttributeValue | None) -> object:
    """How a journal entry records a checked value (a datetime as ISO 8601)."""
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def from_json(kind: str, stored: object) -> AttributeValue | None:
    """A recorded value back to its type (``None`` stays ``None``: unset)."""
    if stored is None:
        return None
    if kind == "datetime" and isinstance(stored, str):
        return datetime.fromisoformat(stored)
    if kind == "float" and isinstance(stored, int | float) and not isinstance(stored, bool):
        return float(stored)
    return stored  # type: ignore[return-value]


__all__ = [
    "COLUMNS",
    "MAX_STR_LENGTH",
    "NAME_RE",
    "ORDERED",
    "TYPES",
    "AttributeType",
    "AttributeValue",
    "check_value",
    "from_json",
    "parse_declared",
    "parse_moment",
    "parse_text",
    "storable_text",
    "to_json",
]
