"""The settings page: every ``WEFT`` key, its default and its meaning."""

from __future__ import annotations

from typing import Any, get_args

from .markdown import page, table


def render_settings() -> str:
    from weft_django.conf import (
        DEFAULTS,
        DESCRIPTIONS,
        DURATION_KEYS,
        OWNERSHIP_MODES,
        BackgroundTasks,
        TransportName,
    )

    choices: dict[str, tuple[str, ...]] = {
        "OWNERSHIP": OWNERSHIP_MODES,
        "BACKGROUND_TASKS": get_args(BackgroundTasks),
        "TRANSPORT": get_args(TransportName),
    }

    def default(key: str, value: Any) -> str:
        if key in DURATION_KEYS:
            return f"{value} s"
        if key == "MAX_PAYLOAD_BYTES":
            return f"{value} ({value // 1024} KiB)"
        if isinstance(value, tuple):
            return "[" + ", ".join(f'"{v}"' for v in value) + "]"
        if isinstance(value, str):
            return f'"{value}"'
        return repr(value)

    def accepts(key: str, value: Any) -> str:
        if key in DURATION_KEYS:
            return "seconds (int/float) or timedelta, > 0"
        if key == "RETENTION":
            return "None, or seconds (int/float) or timedelta, > 0"
        if key == "ENGINE_RECORD_RETENTION":
            return "seconds (int/float) or timedelta, > 0 (default: 7 days)"
        if key == "PROMETHEUS_COLLECTOR":
            return "None or bool"
        if key == "SEARCH_ATTRIBUTES":
            return 'dict: name -> "str" / "int" / "float" / "bool" / "datetime"'
        if key in choices:
            return " / ".join(f'"{c}"' for c in choices[key])
        if isinstance(value, bool):
            return "bool"
        if key == "WORKFLOW_CACHE_SIZE":
            return "int >= 0 (0: off)"
        if isinstance(value, int):
            return "positive int"
        if isinstance(value, tuple):
            return "list of dotted paths"
        return "str"

    rows = [
        (f"`{key}`", f"`{default(key, value)}`", accepts(key, value), DESCRIPTIONS.get(key, ""))
        for key, value in DEFAULTS.items()
    ]
    return page(
        "Settings reference",
        """
        Every setting lives in one `WEFT` dict in your Django settings; every key
        is optional. Durations accept seconds (an `int` or `float`) or a
        `timedelta` (a `bool` is refused) and are held as integer milliseconds.
        The settings reload on `setting_changed`, so `override_settings` works in
        tests. `Engine(**overrides)` takes the same keys in lower case.

        ```python
        WEFT = {"CLAIM_TTL": 30, "CLAIM_RENEW_INTERVAL": 5}
        ```

        Problems are reported by system checks with stable ids, one per
        problem (`weft.E001` … `weft.E026`), and raised as
        `ImproperlyConfigured` when an engine or the client first reads the
        settings; README's "Settings" section lists the
        rules, and [Tuning CLAIM_TTL](../howto/claim-ttl.md) explains the
        timing ones.
        """,
        "## Keys\n",
        table(("key", "default", "accepts", "meaning"), rows),
    )
