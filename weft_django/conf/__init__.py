"""One ``WEFT`` settings dict, validated and typed (SPEC §3): the public names.

Invariant protected: every part of weft-django reads the same validated,
typed view of the settings (durations as integer milliseconds), and that
view follows ``setting_changed`` so ``override_settings`` works in tests.
Validation never touches the database: it runs from the system checks and
when an engine or client first reads the settings (``ImproperlyConfigured``).
The keys are rows of ``keys.Keys`` (name, default, parser, check id,
description), parsed by ``parse`` and validated by ``build``; this module
holds the ``WeftSettings`` object, the transport an installer marked this
process with, and the cache.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from .build import WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER, SettingsProblem, build_values
from .keys import (
    CHECK_IDS,
    DEFAULTS,
    DESCRIPTIONS,
    DURATION_KEYS,
    KEYS,
    OWNERSHIP_MODES,
    BackgroundTasks,
    Keys,
    OwnershipMode,
    TransportName,
)
from .parse import MAX_SETTING_DURATION_MS, duration_ms


@dataclass(frozen=True)
class WeftSettings(Keys):
    """The validated, typed settings: one field per key (``keys.Keys``,
    durations in integer ms), and the user's dict they were built from."""

    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def with_overrides(self, **overrides: Any) -> WeftSettings:
        """A copy with ``Engine(**overrides)`` applied (lower-case §3 keys)."""
        merged = dict(self.raw)
        for key, value in overrides.items():
            upper = key.upper()
            if upper not in DEFAULTS:
                raise ImproperlyConfigured(
                    f"Unknown weft override {key!r}; expected one of "
                    f"{', '.join(k.lower() for k in DEFAULTS)}"
                )
            merged[upper] = value
        settings, problems = build_settings(merged)
        if problems:
            raise ImproperlyConfigured("; ".join(p.message for p in problems))
        return settings


def build_settings(user: dict[str, Any]) -> tuple[WeftSettings, list[SettingsProblem]]:
    """Merge ``user`` over DEFAULTS and validate; returns the settings and every problem."""
    values, problems = build_values(user, _process_transport)
    settings = WeftSettings(**{key.attr: values[key.name] for key in KEYS}, raw=dict(user))
    return settings, problems


#: The transport a transport's installer marked this process with
#: (``weft_django.celery.install`` → ``"celery"``); ``None``: the settings decide.
_process_transport: TransportName | None = None


def mark_process_transport(name: TransportName | None) -> None:
    """Set (or, with ``None``, clear) this process's transport; the settings reload.

    Touches no Django setting: ``install(app)`` runs while the project's
    settings module is still being imported.
    """
    global _process_transport
    _process_transport = name
    _holder.reset()


def process_transport() -> TransportName | None:
    return _process_transport


class _SettingsHolder:
    """Caches the validated settings and drops them on ``setting_changed``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cached: WeftSettings | None = None

    def user_dict(self) -> dict[str, Any]:
        from django.conf import settings as django_settings

        value = getattr(django_settings, "WEFT", {}) or {}
        if not isinstance(value, dict):
            raise ImproperlyConfigured(f"settings.WEFT must be a dict, got {type(value).__name__}")
        return dict(value)

    def get(self) -> WeftSettings:
        with self._lock:
            if self._cached is None:
                settings, problems = build_settings(self.user_dict())
                if problems:
                    raise ImproperlyConfigured(
                        "Invalid WEFT settings: " + "; ".join(p.message for p in problems)
                    )
                self._cached = settings
            return self._cached

    def evaluate(self) -> tuple[WeftSettings, list[SettingsProblem]]:
        """Read ``WEFT`` once: the settings (defaults where invalid) and every problem."""
        try:
            user = self.user_dict()
        except ImproperlyConfigured as exc:
            return build_settings({})[0], [SettingsProblem(CHECK_IDS["weft-not-a-dict"], str(exc))]
        return build_settings(user)

    def reset(self) -> None:
        with self._lock:
            self._cached = None


_holder = _SettingsHolder()


def get_settings() -> WeftSettings:
    """The validated settings (raises ``ImproperlyConfigured`` naming bad keys)."""
    return _holder.get()


def settings_problems() -> list[SettingsProblem]:
    """Every problem with the current settings, for the system checks."""
    return _holder.evaluate()[1]


def evaluate_settings() -> tuple[WeftSettings, list[SettingsProblem]]:
    """The current settings (defaults where invalid) and every problem, from
    one read of ``WEFT`` (what the system checks use)."""
    return _holder.evaluate()


def _on_setting_changed(*, setting: str, **_: Any) -> None:
    if setting == "WEFT":
        _holder.reset()


setting_changed.connect(_on_setting_changed, dispatch_uid="weft_django.conf.reload")

__all__ = [
    "CHECK_IDS",
    "DEFAULTS",
    "DESCRIPTIONS",
    "DURATION_KEYS",
    "MAX_SETTING_DURATION_MS",
    "OWNERSHIP_MODES",
    "WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER",
    "BackgroundTasks",
    "OwnershipMode",
    "SettingsProblem",
    "TransportName",
    "WeftSettings",
    "build_settings",
    "duration_ms",
    "evaluate_settings",
    "get_settings",
    "mark_process_transport",
    "process_transport",
    "settings_problems",
]
