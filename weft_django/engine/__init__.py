"""The workflow runtime. ``Engine`` is loaded lazily so that importing
``weft_django.engine.workflow.definitions`` (``@workflow``) never touches models."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from weft_django.engine.engine import Engine as Engine


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from weft_django.engine.engine import Engine

        return Engine
    raise AttributeError(f"module 'weft_django.engine' has no attribute {name!r}")


__all__ = ["Engine"]
