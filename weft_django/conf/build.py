"""Validating a ``WEFT`` dict: each key by its row's parser, then the cross-key rules.

Invariant protected: validation never raises and never touches the
database. Any dict, however hostile, gives a typed value for every key (the
default where the user's value is refused) and a list of problems, each
with its stable check id (``CHECK_IDS``) and a message naming the key, so
the system checks, a starting engine and ``get_settings()`` refuse the same
things with the same words. A key is checked by its row alone
(``keys.Keys``); a rule that relates keys is a function in ``RULES``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .keys import CHECK_IDS, DEFAULTS, KEYS, Key
from .parse import PartlyRefused

#: SPEC §4.4: CLAIM_TTL must be at least this many renew intervals.
WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER = 3


@dataclass(frozen=True)
class SettingsProblem:
    """One validation finding: a stable system-check id and its message."""

    id: str
    message: str
    hint: str | None = None


def _fmt_s(ms: int) -> str:
    return f"{ms / 1000:.1f} s"


def renewals_fit_their_ttls(values: Mapping[str, Any]) -> list[SettingsProblem]:
    """For the claim and for the lease: the renewal fires strictly before the
    TTL lapses, and the TTL spans at least three renewals (SPEC §4.4)."""
    problems = []
    for prefix in ("CLAIM", "LEASE"):
        ttl, renew = values[f"{prefix}_TTL"], values[f"{prefix}_RENEW_INTERVAL"]
        if renew >= ttl:
            problems.append(
                SettingsProblem(
                    CHECK_IDS[f"{prefix.lower()}-renew-not-below-ttl"],
                    f"{prefix}_RENEW_INTERVAL ({_fmt_s(renew)}) must be strictly less than "
                    f"{prefix}_TTL ({_fmt_s(ttl)}), so a renewal fires before it can lapse",
                )
            )
        elif ttl < WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER * renew:
            problems.append(
                SettingsProblem(
                    CHECK_IDS[f"{prefix.lower()}-ttl-below-three-renewals"],
                    f"{prefix}_TTL ({_fmt_s(ttl)}) must be at least "
                    f"{WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER} × {prefix}_RENEW_INTERVAL "
                    f"({_fmt_s(renew)}) = {_fmt_s(WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER * renew)}",
                )
            )
    return problems


#: The cross-key rules, run over the parsed values (by key name) once every
#: key has one; each returns its problems.
RULES: tuple[Callable[[Mapping[str, Any]], list[SettingsProblem]], ...] = (renewals_fit_their_ttls,)


def _read(key: Key, value: Any) -> tuple[Any, list[SettingsProblem]]:
    """``value`` parsed by ``key``'s row, or what to use instead and why."""
    try:
        return key.parse(key.name, value), []
    except PartlyRefused as refused:
        return refused.parsed, [
            SettingsProblem(CHECK_IDS[kind or key.check], message)
            for kind, message in refused.findings
        ]
    except ValueError as refused:
        problem = SettingsProblem(CHECK_IDS[key.check], str(refused), hint=key.hint)
        return key.parsed_default(), [problem]


def build_values(
    user: Mapping[str, Any], process_transport: str | None
) -> tuple[dict[str, Any], list[SettingsProblem]]:
    """``user`` over the defaults: each key's value by name (its default where
    refused) and every problem. ``process_transport``, when set, is the
    transport an installer marked this process with; it wins over the
    user's ``TRANSPORT`` (a different one is ``weft.E017``)."""
    problems = [
        SettingsProblem(
            CHECK_IDS["unknown-key"],
            f"WEFT[{name!r}] is not a weft-django setting",
            hint="Known keys: " + ", ".join(DEFAULTS),
        )
        for name in user
        if name not in DEFAULTS
    ]
    merged = {**DEFAULTS, **{k: v for k, v in user.items() if k in DEFAULTS}}
    if process_transport is not None:
        if "TRANSPORT" in user and user["TRANSPORT"] != process_transport:
            problems.append(
                SettingsProblem(
                    CHECK_IDS["transport-conflicts-with-install"],
                    f"WEFT['TRANSPORT'] is {user['TRANSPORT']!r} but this process's transport "
                    f"was set to {process_transport!r} by weft_django.celery.install(app)",
                    hint=f"Leave TRANSPORT unset (install() sets it) or set it to "
                    f"{process_transport!r}.",
                )
            )
        merged["TRANSPORT"] = process_transport

    values: dict[str, Any] = {}
    for key in KEYS:
        values[key.name], found = _read(key, merged[key.name])
        problems += found
    for rule in RULES:
        problems += rule(values)
    return values, problems


__all__ = [
    "RULES",
    "WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER",
    "SettingsProblem",
    "build_values",
    "renewals_fit_their_ttls",
]
