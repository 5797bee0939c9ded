"""``RunFilter``: which runs a listing or a bulk operation means.

One filter, read the same way by ``client.list_runs``, the API's
``GET workflows/``, the admin, the bulk operations (``client.cancel_many``
...) and the ``manage.py weft`` commands, so "the runs this filter matches"
is one query wherever it is asked.

Invariant: a filter is validated when it is built -- an unknown key, an
undeclared search attribute, a value of the wrong type, an unknown status
-- and refused with ``InvalidRunFilter`` naming the key and the value, so
a typo can never widen a query (``attr=amout=5`` is an error, not "every
run"). ``is_empty()`` says when a filter would match every run: the bulk
operations refuse one without ``allow_all=True``.

Attribute conditions are ``EXISTS`` subqueries on ``RunSearchAttribute``
(one per condition), each answered from the ``(name, <typed value>)`` index.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Literal

from django.db.models import Exists, OuterRef, Q, QuerySet

from weft_django.conf import get_settings
from weft_django.errors import InvalidRunFilter
from weft_django.kernel.attribute_types import (
    COLUMNS,
    ORDERED,
    AttributeValue,
    check_value,
    parse_moment,
    parse_text,
    storable_text,
)
from weft_django.models import RUN_STATUSES, RunSearchAttribute, WorkflowRun

RangeOp = Literal[">", ">=", "<", "<="]
_LOOKUPS: dict[str, str] = {">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}
_ATTR_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]{0,63})\s*(>=|<=|=|>|<)(.*)$", re.DOTALL)

TIME_KEYS = ("created_after", "created_before", "finished_after", "finished_before")
TUPLE_KEYS = ("status", "workflow", "workflow_id")
#: Every key ``from_params`` reads (``name`` is the API's older spelling of ``workflow``).
PARAM_KEYS = (*TUPLE_KEYS, "parent", *TIME_KEYS, "attr", "name")


@dataclass(frozen=True)
class AttributeRange:
    """``name op value`` on an ordered attribute (int, float, datetime)."""

    name: str
    op: RangeOp
    value: int | float | datetime

    def __str__(self) -> str:
        shown = self.value.isoformat() if isinstance(self.value, datetime) else self.value
        return f"{self.name}{self.op}{shown}"


def _declared() -> dict[str, str]:
    return dict(get_settings().search_attributes)


def _tuple(key: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Sequence | frozenset | set):
        raise InvalidRunFilter(key, repr(value), "must be a string or a list of strings")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str) or not item or len(item) > 200 or not storable_text(item):
            raise InvalidRunFilter(
                key,
                item if isinstance(item, str) else repr(item),
                "must be a non-empty string of at most 200 characters (no NUL, no lone surrogate)",
            )
    return items


def _attribute(name: object, value: object) -> tuple[str, AttributeValue]:
    declared = _declared()
    if not isinstance(name, str) or name not in declared:
        known = ", ".join(sorted(declared)) or "none are declared in WEFT['SEARCH_ATTRIBUTES']"
        raise InvalidRunFilter(
            "attr", f"{name}={value!s:.100}", f"unknown search attribute {name!r} (known: {known})"
        )
    try:
        return name, check_value(name, declared[name], value)
    except (TypeError, ValueError) as exc:
        raise InvalidRunFilter("attr", f"{name}={value!s:.100}", str(exc)) from None


@dataclass(frozen=True)
class RunFilter:
    """Which runs: every field narrows (AND); an empty filter matches every run.

    ``status``, ``workflow`` (type names), ``workflow_id``: any of the values
    (a single string is taken as a one-element tuple). ``parent``: children
    of that workflow id. Time bounds are strict (``created_after < created_at
    < created_before``). ``attributes``: equality on declared search
    attributes; ``attribute_ranges``: ``>``, ``>=``, ``<``, ``<=`` on the
    ordered ones (int, float, datetime).
    """

    status: tuple[str, ...] = ()
    workflow: tuple[str, ...] = ()
    workflow_id: tuple[str, ...] = ()
    parent: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    finished_after: datetime | None = None
    finished_before: datetime | None = None
    attributes: Mapping[str, str | int | float | bool | datetime] = field(default_factory=dict)
    attribute_ranges: tuple[AttributeRange, ...] = ()

    def __post_init__(self) -> None:
        put = object.__setattr__
        for key in TUPLE_KEYS:
            put(self, key, _tuple(key, getattr(self, key)))
        for status in self.status:
            if status not in RUN_STATUSES:
                raise InvalidRunFilter(
                    "status", status, "unknown status (one of " + ", ".join(RUN_STATUSES) + ")"
                )
        if self.parent is not None and (
            not isinstance(self.parent, str)
            or not self.parent
            or len(self.parent) > 200
            or not storable_text(self.parent)
        ):
            raise InvalidRunFilter("parent", repr(self.parent), "must be a workflow id")
        for key in TIME_KEYS:
            moment = getattr(self, key)
            if moment is None:
                continue
            if not isinstance(moment, datetime):
                raise InvalidRunFilter(key, repr(moment), "must be a datetime")
            if moment.tzinfo is None or moment.utcoffset() is None:
                raise InvalidRunFilter(key, moment.isoformat(), "must be an aware datetime")
            try:
                put(self, key, moment.astimezone(UTC))  # PostgreSQL refuses offsets past 15:59
            except OverflowError:
                raise InvalidRunFilter(key, moment.isoformat(), "is out of range") from None
        for what in ("created", "finished"):
            after, before = getattr(self, f"{what}_after"), getattr(self, f"{what}_before")
            if after is not None and before is not None and after >= before:
                raise InvalidRunFilter(
                    f"{what}_before",
                    before.isoformat(),
                    f"must be later than {what}_after ({after.isoformat()})",
                )
        if not isinstance(self.attributes, Mapping):
            raise InvalidRunFilter("attr", repr(self.attributes), "must be a mapping name -> value")
        put(self, "attributes", dict(_attribute(n, v) for n, v in self.attributes.items()))
        declared = _declared()
        ranges: list[AttributeRange] = []
        for item in tuple(self.attribute_ranges):
            if not isinstance(item, AttributeRange) or item.op not in _LOOKUPS:
                raise InvalidRunFilter("attr", repr(item), "must be an AttributeRange")
            _name, checked = _attribute(item.name, item.value)
            if declared[item.name] not in ORDERED:
                raise InvalidRunFilter(
                    "attr",
                    str(item),
                    f"search attribute {item.name!r} is a {declared[item.name]}: only int, "
                    "float and datetime attributes take >, >=, < or <=",
                )
            assert not isinstance(checked, str | bool)
            ranges.append(AttributeRange(item.name, item.op, checked))  # an int bound of a float
        put(self, "attribute_ranges", tuple(ranges))

    # -- reading ---------------------------------------------------------------
    def is_empty(self) -> bool:
        """True when it would match every run (no field narrows)."""
        return not any(getattr(self, f.name) for f in fields(self))

    def describe(self) -> str:
        """A one-line summary (``status=failed workflow=order attr=customer=acme``)."""
        parts: list[str] = []
        for key in (*TUPLE_KEYS, "parent", *TIME_KEYS):
            value = getattr(self, key)
            if not value:
                continue
            if isinstance(value, tuple):
                parts.append(f"{key}={','.join(value)}")
            elif isinstance(value, datetime):
                parts.append(f"{key}={value.isoformat()}")
            else:
                parts.append(f"{key}={value}")
        for name, value in self.attributes.items():
            shown = value.isoformat() if isinstance(value, datetime) else value
            parts.append(f"attr={name}={shown}")
        parts.extend(f"attr={item}" for item in self.attribute_ranges)
        return " ".join(parts) or "(every run)"

    @classmethod
    def from_params(cls, params: Mapping[str, str | Sequence[str]]) -> RunFilter:
        """A filter from strings (a query string, a command line, a JSON body).

        Keys: ``status`` (repeatable, or comma-separated), ``workflow`` (or
        ``name``) and ``workflow_id`` (repeatable), ``parent``, the ISO 8601
        ``created_after`` ... ``finished_before`` (without an offset: the
        current time zone), and ``attr``: ``NAME=VALUE`` strings, VALUE read
        by the attribute's declared type (``NAME>=VALUE`` and ``>``, ``<``,
        ``<=`` for int, float and datetime attributes). An unknown key, an
        undeclared attribute, a bad value: ``InvalidRunFilter`` naming it.
        """
        values: dict[str, list[str]] = {}
        for key in params:
            if key not in PARAM_KEYS:
                raise InvalidRunFilter(
                    key,
                    _shown(params, key),
                    "unknown filter key (one of " + ", ".join(PARAM_KEYS) + ")",
                )
            values[key] = _strings(params, key)
        kwargs: dict[str, Any] = {}
        statuses = [s.strip() for v in values.get("status", []) for s in v.split(",") if s.strip()]
        if statuses:
            kwargs["status"] = tuple(statuses)
        workflows = [*values.get("workflow", []), *values.get("name", [])]
        if workflows:
            kwargs["workflow"] = tuple(workflows)
        if values.get("workflow_id"):
            kwargs["workflow_id"] = tuple(values["workflow_id"])
        kwargs["parent"] = _single("parent", values.get("parent"))
        for key in TIME_KEYS:
            text = _single(key, values.get(key))
            if text is not None:
                try:
                    kwargs[key] = parse_moment(text, key)
                except ValueError as exc:
                    raise InvalidRunFilter(key, text, str(exc)) from None
        attributes: dict[str, AttributeValue] = {}
        ranges: list[AttributeRange] = []
        for text in values.get("attr", []):
            name, op, value = _parse_attr(text)
            if op == "=":
                if name in attributes and attributes[name] != value:
                    raise InvalidRunFilter(
                        "attr", text, f"search attribute {name!r} is given two different values"
                    )
                attributes[name] = value
            else:
                assert not isinstance(value, str | bool)
                ranges.append(AttributeRange(name, op, value))  # type: ignore[arg-type]
        kwargs["attributes"] = attributes
        kwargs["attribute_ranges"] = tuple(ranges)
        return cls(**kwargs)

    def queryset(self, using: str | None = None) -> QuerySet[WorkflowRun]:
        """The matching runs (unordered; callers order them)."""
        runs = WorkflowRun.objects.using(using or get_settings().database).all()
        if self.status:
            runs = runs.filter(status__in=self.status)
        if self.workflow:
            runs = runs.filter(name__in=self.workflow)
        if self.workflow_id:
            runs = runs.filter(workflow_id__in=self.workflow_id)
        if self.parent is not None:
            runs = runs.filter(parent__workflow_id=self.parent)
        bounds = {
            "created_at__gt": self.created_after,
            "created_at__lt": self.created_before,
            "finished_at__gt": self.finished_after,
            "finished_at__lt": self.finished_before,
        }
        runs = runs.filter(**{k: v for k, v in bounds.items() if v is not None})
        declared = _declared()
        for name, value in self.attributes.items():
            runs = runs.filter(_has(name, {COLUMNS[declared[name]]: value}))
        for item in self.attribute_ranges:
            column = COLUMNS[declared[item.name]]
            runs = runs.filter(_has(item.name, {f"{column}__{_LOOKUPS[item.op]}": item.value}))
        return runs


def _has(name: str, condition: dict[str, Any]) -> Q:
    return Q(
        Exists(RunSearchAttribute.objects.filter(run_id=OuterRef("pk"), name=name, **condition))
    )


def _strings(params: Mapping[str, Any], key: str) -> list[str]:
    getlist = getattr(params, "getlist", None)
    raw = getlist(key) if callable(getlist) else params[key]
    items = [raw] if isinstance(raw, str) else list(raw) if isinstance(raw, Sequence) else [raw]
    for item in items:
        if not isinstance(item, str):
            raise InvalidRunFilter(key, repr(item), "must be a string")
    return items


def _shown(params: Mapping[str, Any], key: str) -> str:
    try:
        return ",".join(_strings(params, key))
    except InvalidRunFilter:
        return repr(params[key])


def _single(key: str, values: list[str] | None) -> str | None:
    if not values:
        return None
    if len(values) > 1:
        raise InvalidRunFilter(key, ",".join(values), "takes one value")
    return values[0]


def _parse_attr(text: str) -> tuple[str, str, AttributeValue]:
    match = _ATTR_RE.match(text)
    if match is None:
        raise InvalidRunFilter(
            "attr", text, "must be NAME=VALUE (or NAME>=VALUE, >, <, <= for numbers and datetimes)"
        )
    name, op, raw = match.groups()
    declared = _declared()
    if name not in declared:
        known = ", ".join(sorted(declared)) or "none are declared in WEFT['SEARCH_ATTRIBUTES']"
        raise InvalidRunFilter("attr", text, f"unknown search attribute {name!r} (known: {known})")
    kind = declared[name]
    if op != "=" and kind not in ORDERED:
        raise InvalidRunFilter(
            "attr",
            text,
            f"search attribute {name!r} is a {kind}: only int, float and datetime attributes "
            "take >, >=, < or <=",
        )
    try:
        value = parse_text(name, kind, raw if kind == "str" else raw.strip())
    except (TypeError, ValueError) as exc:
        raise InvalidRunFilter("attr", text, str(exc)) from None
    return name, op, value


__all__ = ["PARAM_KEYS", "AttributeRange", "InvalidRunFilter", "RangeOp", "RunFilter"]
