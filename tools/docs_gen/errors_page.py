"""The errors page: every ``WeftError``, its code, HTTP status and an example message."""

from __future__ import annotations

import inspect

from .examples import example_instance, init_hints, literal_values, signature
from .markdown import md, page, table


def _error_statuses(cls: type) -> list[tuple[str, int]]:
    """``[(condition, status)]``: the class status, or one per Literal value when the
    constructor's only parameter is a Literal that changes the instance's status."""
    try:
        hints = init_hints(cls)
    except Exception:
        hints = {}
    params = list(inspect.signature(cls).parameters)
    if len(params) == 1:
        literals = literal_values(hints.get(params[0]))
        if literals:
            found = []
            for value in literals:
                instance = cls(value)
                found.append((f"{params[0]}={value}", int(instance.http_status)))
            if len({status for _, status in found}) > 1:
                return found
    return [("", int(cls.http_status))]  # type: ignore[attr-defined]


def _api_codes() -> list[tuple[str, str, str]]:
    """``(code, HTTP, meaning)`` of the REST API's own error classes (not ``WeftError``s)."""
    from rest_framework.exceptions import APIException

    from weft_django.api import exceptions as api_exceptions

    found = [
        cls
        for cls in vars(api_exceptions).values()
        if isinstance(cls, type)
        and issubclass(cls, APIException)
        and cls.__module__ == api_exceptions.__name__
    ]
    return [
        (f"`{cls.default_code}`", str(cls.status_code), md(cls.__doc__ or ""))
        for cls in sorted(found, key=lambda c: str(c.default_code))
    ]


def render_errors() -> str:
    from weft_django.errors import ERROR_CLASSES, WeftError

    rows = []
    sections = []
    for cls in ERROR_CLASSES:
        statuses = _error_statuses(cls)
        http = " / ".join(
            f"{status} ({cond.split('=', 1)[1]})" if cond else str(status)
            for cond, status in statuses
        )
        rows.append((f"[`{cls.__name__}`](#{cls.__name__.lower()})", f"`{cls.code}`", http))
        bases = [b.__name__ for b in cls.__mro__[1:] if b not in (WeftError, BaseException, object)]
        extra_bases = [b for b in bases if b != "Exception"]
        lines = [
            f"### {cls.__name__}\n",
            f"`{signature(cls)}` — code `{cls.code}`, HTTP {http}"
            + (f"; also a `{'`, `'.join(extra_bases)}`" if extra_bases else "")
            + ".\n",
            md(cls.__doc__) + "\n",
        ]
        example = example_instance(cls)
        if example is not None:
            lines.append(f"Example message:\n\n> {example}\n")
        sections.append("\n".join(lines))
    return page(
        "Errors reference",
        """
        Every error weft-django raises to its callers is a subclass of
        `weft_django.errors.WeftError`. Each has a stable, machine-readable
        `code`, the HTTP status the REST API answers with, keeps each
        constructor argument as an attribute of the same name, survives
        `pickle` (Celery ships exceptions between processes), and serialises
        with `as_dict()` to the API's error body:

        ```json
        {"code": "workflow_not_found", "message": "No workflow with id \\"x\\" exists.",
         "workflow_id": "x"}
        ```

        Lost races inside the claim protocol are not errors (the registry returns
        result objects); these are raised only where a caller asked for
        something specific and cannot have it.
        """,
        "## Summary\n",
        table(("error", "code", "HTTP"), rows),
        "## Errors\n",
        *sections,
        "## Codes of the REST API itself\n",
        "Besides every code above, the API answers these (DRF's own codes such as "
        "`invalid`, `parse_error`, `not_found`, `method_not_allowed` aside; see the "
        "[API reference](api.md)):\n",
        table(("code", "HTTP", "meaning"), _api_codes()),
    )
