"""Example values for constructor parameters: the example messages of the errors page.

Why synthesised: each error class documents its message by being built from
placeholder arguments, so the page shows the real ``str()`` of the error.
"""

from __future__ import annotations

import inspect
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints


def literal_values(annotation: Any) -> tuple[Any, ...] | None:
    if get_origin(annotation) is Literal:
        return get_args(annotation)
    return None


def init_hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of ``cls``'s constructor."""
    init = inspect.getattr_static(cls, "__init__")
    return get_type_hints(init)


def placeholder(name: str, annotation: Any) -> Any:
    """An example value for a constructor parameter (for example messages)."""
    literals = literal_values(annotation)
    if literals:
        return literals[0]
    options = get_args(annotation) if get_origin(annotation) in (Union, type(int | None)) else ()
    kinds = set(options) or {annotation}
    if int in kinds and str not in kinds:
        if name.endswith("_at"):
            return 1_700_000_000_000
        return 60_000 if name.endswith("_ms") else 3
    if str in kinds:
        return {
            "workflow_id": "order-o-1",
            "held_by": "engine-b",
            "holder_id": "engine-a",
            "configured_mode": "lease",
            "stored_mode": "workflow-lease",
            "status": "running",
            "action": "resume",
            "name": "order",
            "activity": "charge_card",
            "idempotency_key": "order:o-1",
            "existing_name": "order",
            "requested_name": "refund",
        }.get(name, f"<{name}>")
    return {"type": "ValueError", "message": "card declined"}


def example_instance(cls: type[BaseException], **fixed: Any) -> BaseException | None:
    """``cls`` built from placeholder arguments, or ``None`` if that fails."""
    try:
        hints = init_hints(cls)
        params = list(inspect.signature(cls).parameters.values())
        if {"status", "error"} <= {p.name for p in params}:
            fixed = {"status": "failed", **fixed}  # a run that ended with an error
        kwargs = {
            p.name: fixed.get(p.name, placeholder(p.name, hints.get(p.name, str)))
            for p in params
            if p.default is inspect.Parameter.empty or p.name in fixed or p.name == "workflow_id"
        }
        return cls(**kwargs)
    except Exception:
        return None


def signature(cls: type) -> str:
    params = list(inspect.signature(cls).parameters.values())
    return f"{cls.__name__}({', '.join(p.name for p in params)})"
