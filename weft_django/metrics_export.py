"""Moved to ``weft_django.contrib.prometheus``; kept for imports."""

from __future__ import annotations

from weft_django.contrib.prometheus import (
    OPT_IN_SETTING,
    WeftClusterCollector,
    register,
    settings_opt_in,
    unregister,
)

__all__ = ["OPT_IN_SETTING", "WeftClusterCollector", "register", "settings_opt_in", "unregister"]
