"""One ``WEFT`` settings dict, its defaults and its validation (SPEC §3).

Why one object: every part of weft-django reads the same validated, typed
view of the settings (durations as integer milliseconds), and that view
reloads on ``setting_changed`` so ``override_settings`` works in tests.
Validation never touches the database: it runs from system checks and when
an engine or client first reads the settings (``ImproperlyConfigured``).
``DEFAULTS`` is the one table of defaults: ``WeftSettings`` derives its
field defaults from it. Each kind of problem has its own stable check id
(``CHECK_IDS``). Longer than 400 lines: the defaults table and the validator
of each key read best in one module.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from weft_django.kernel.attribute_types import AttributeType
from weft_django.kernel.attribute_types import parse_declared as parse_search_attributes
from weft_django.kernel.durations import to_ms
from weft_django.kernel.queue_spec import QueueSpec, parse_queues
from weft_django.kernel.schedule_spec import ScheduleSpec, parse_declared

#: SPEC §4.4: CLAIM_TTL must be at least this many renew intervals.
WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER = 3

OwnershipMode = Literal["none", "lease", "workflow-lease"]
OWNERSHIP_MODES: tuple[OwnershipMode, ...] = ("none", "lease", "workflow-lease")
BackgroundTasks = Literal["auto", "manual"]
TransportName = Literal["polling", "celery"]

DURATION_KEYS = (
    "CLAIM_TTL",
    "CLAIM_RENEW_INTERVAL",
    "LEASE_TTL",
    "LEASE_RENEW_INTERVAL",
    "LEASE_WAIT_TIMEOUT",
    "POLL_INTERVAL",
    "CELERY_ETA_HORIZON",
)

DEFAULTS: dict[str, Any] = {
    "OWNERSHIP": "workflow-lease",
    "CLAIM_TTL": 30,
    "CLAIM_RENEW_INTERVAL": 5,
    "LEASE_TTL": 30,
    "LEASE_RENEW_INTERVAL": 5,
    "LEASE_WAIT_TIMEOUT": 60,
    "BACKGROUND_TASKS": "auto",
    "TRANSPORT": "polling",
    "POLL_INTERVAL": 0.2,
    "WORKER_CONCURRENCY": 4,
    "CELERY_ETA_HORIZON": 60,
    "MAX_PAYLOAD_BYTES": 256 * 1024,
    "API_PERMISSION_CLASSES": ("rest_framework.permissions.IsAdminUser",),
    "RETENTION": None,
    "DATABASE": "default",
    "WAKE_BACKENDS": ("weft_django.transports.notify.NotifyBackend",),
    "PROMETHEUS_COLLECTOR": None,
    "TURN_MAX_FAILURES": 5,
    "ACTIVITY_CONCURRENCY": 16,
    "WORKFLOW_CACHE_SIZE": 1000,
    "SESSION_PRESENCE": True,
    "SCHEDULES": {},
    "QUEUES": None,
    "REPLAY_CHECK_SAMPLE": 100,
    "ENGINE_RECORD_RETENTION": 7 * 24 * 3600,
    "TRACING": True,
    "SEARCH_ATTRIBUTES": {},
}

#: One stable system-check id per kind of problem (SPEC §3).
CHECK_IDS: Final[dict[str, str]] = {
    "unknown-ownership": "weft.E001",
    "bad-duration": "weft.E002",
    "claim-renew-not-below-ttl": "weft.E003",
    "claim-ttl-below-three-renewals": "weft.E004",
    "lease-renew-not-below-ttl": "weft.E005",
    "lease-ttl-below-three-renewals": "weft.E006",
    "unknown-key": "weft.E007",
    "bad-choice": "weft.E008",
    "weft-not-a-dict": "weft.E016",
    "transport-conflicts-with-install": "weft.E017",
    "not-a-positive-integer": "weft.E018",
    "bad-permission-classes": "weft.E019",
    "bad-database-alias": "weft.E020",
    "bad-wake-backends": "weft.E021",
    "bad-prometheus-collector": "weft.E022",
    "bad-turn-max-failures": "weft.E023",
    "bad-activity-concurrency": "weft.E024",
    "bad-workflow-cache-size": "weft.E025",
    "bad-session-presence": "weft.E026",
    "bad-schedules": "weft.E027",
    "bad-schedule-spec": "weft.E028",
    "unknown-schedule-workflow": "weft.E029",
    "bad-queue": "weft.E030",
    "bad-engine-record-retention": "weft.E036",
    "bad-tracing": "weft.E040",
    "bad-search-attributes": "weft.E045",
    "bad-search-attribute-name": "weft.E046",
    "bad-search-attribute-type": "weft.E047",
}

#: One line per key, used by the reference docs and `weft_status`.
DESCRIPTIONS: dict[str, str] = {
    "OWNERSHIP": '"none", "lease" or "workflow-lease" (per-workflow fenced claims)',
    "CLAIM_TTL": "a claim's lifetime after each renewal",
    "CLAIM_RENEW_INTERVAL": "renewal period; the Celery polling backstop",
    "LEASE_TTL": 'the store-wide lease\'s lifetime ("lease" mode)',
    "LEASE_RENEW_INTERVAL": 'the store-wide lease\'s renewal period ("lease" mode)',
    "LEASE_WAIT_TIMEOUT": "how long a standby engine waits for the lease",
    "BACKGROUND_TASKS": '"manual": the host drives run_maintenance()',
    "TRANSPORT": 'set to "celery" by install(app)',
    "POLL_INTERVAL": "polling period of a standalone engine",
    "WORKER_CONCURRENCY": "turns an engine drives at once",
    "CELERY_ETA_HORIZON": "a sleep is handed to Celery only once due within this",
    "MAX_PAYLOAD_BYTES": "inputs, results, signals, errors",
    "API_PERMISSION_CLASSES": "DRF permission classes for the API",
    "RETENTION": "purge terminal runs older than this",
    "DATABASE": "the alias every weft query uses",
    "WAKE_BACKENDS": "dotted paths of the wake backends (WakeBackend subclasses) to install",
    "PROMETHEUS_COLLECTOR": "register the cluster collector with prometheus_client "
    "(None: when django_prometheus is installed)",
    "TURN_MAX_FAILURES": "turns in a row that may raise out of the engine (retried with "
    "backoff) before the run is suspended with the error",
    "ACTIVITY_CONCURRENCY": "activity attempts one engine process (or one Celery pool process) "
    "runs at once; separate from WORKER_CONCURRENCY",
    "WORKFLOW_CACHE_SIZE": "workflows whose live generator an engine (or one Celery pool "
    "process) keeps between turns (0 turns the cache off)",
    "SESSION_PRESENCE": "PostgreSQL: each engine holds a session-level advisory lock, so a "
    "killed engine's claims are taken over at once, not after CLAIM_TTL (ignored on SQLite)",
    "SCHEDULES": "schedules declared in code (id -> workflow, cron or every, ...), synced "
    "when an engine boots; a removed one is paused",
    "QUEUES": "flow control: {name: {concurrency, per_key_concurrency, rate, parked_holds_slot}}",
    "REPLAY_CHECK_SAMPLE": "live runs `check --deploy` replays against the code (weft.W050), "
    "spread over every live workflow name",
    "ENGINE_RECORD_RETENTION": "EngineRecords silent this long are folded into the metric totals "
    "and deleted at engine boot (counters stay monotonic)",
    "TRACING": "OpenTelemetry spans for starts, turns, activity attempts and runs when "
    "opentelemetry-api is installed (the otel extra); False turns them off",
    "SEARCH_ATTRIBUTES": "declared search attributes {name: type} (str, int, float, bool, "
    "datetime) that ctx.upsert_search_attributes sets and list_runs / the API / the admin "
    "filter on",
}


def _default_ms(key: str) -> int:
    return to_ms(DEFAULTS[key], key)


@dataclass(frozen=True)
class SettingsProblem:
    """One validation finding: a stable system-check id and its message."""

    id: str
    message: str
    hint: str | None = None


@dataclass(frozen=True)
class WeftSettings:
    """The validated, typed settings. Durations are integer milliseconds."""

    ownership: OwnershipMode = DEFAULTS["OWNERSHIP"]
    claim_ttl_ms: int = _default_ms("CLAIM_TTL")
    claim_renew_interval_ms: int = _default_ms("CLAIM_RENEW_INTERVAL")
    lease_ttl_ms: int = _default_ms("LEASE_TTL")
    lease_renew_interval_ms: int = _default_ms("LEASE_RENEW_INTERVAL")
    lease_wait_timeout_ms: int = _default_ms("LEASE_WAIT_TIMEOUT")
    background_tasks: BackgroundTasks = DEFAULTS["BACKGROUND_TASKS"]
    transport: TransportName = DEFAULTS["TRANSPORT"]
    poll_interval_ms: int = _default_ms("POLL_INTERVAL")
    worker_concurrency: int = DEFAULTS["WORKER_CONCURRENCY"]
    celery_eta_horizon_ms: int = _default_ms("CELERY_ETA_HORIZON")
    max_payload_bytes: int = DEFAULTS["MAX_PAYLOAD_BYTES"]
    api_permission_classes: tuple[str, ...] = tuple(DEFAULTS["API_PERMISSION_CLASSES"])
    retention_ms: int | None = DEFAULTS["RETENTION"]
    database: str = DEFAULTS["DATABASE"]
    wake_backends: tuple[str, ...] = tuple(DEFAULTS["WAKE_BACKENDS"])
    #: ``None``: decide by whether ``django_prometheus`` is installed.
    prometheus_collector: bool | None = DEFAULTS["PROMETHEUS_COLLECTOR"]
    turn_max_failures: int = DEFAULTS["TURN_MAX_FAILURES"]
    activity_concurrency: int = DEFAULTS["ACTIVITY_CONCURRENCY"]
    workflow_cache_size: int = DEFAULTS["WORKFLOW_CACHE_SIZE"]
    session_presence: bool = DEFAULTS["SESSION_PRESENCE"]
    schedules: tuple[ScheduleSpec, ...] = ()
    queues: dict[str, QueueSpec] = field(default_factory=dict, compare=False)
    replay_check_sample: int = DEFAULTS["REPLAY_CHECK_SAMPLE"]
    engine_record_retention_ms: int = _default_ms("ENGINE_RECORD_RETENTION")
    #: Spans when opentelemetry is importable (``engine.tracing``).
    tracing: bool = DEFAULTS["TRACING"]
    #: ``{name: type}`` (``search_attribute_types``).
    search_attributes: dict[str, AttributeType] = field(default_factory=dict, compare=False)
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


def _fmt_s(ms: int) -> str:
    return f"{ms / 1000:.1f} s"


#: The longest duration a setting may hold (100 years). Why a bound: every
#: duration is added to an engine-clock timestamp (a claim's expiry, a
#: retention cut-off), and the store keeps those below 2**53 ms; a larger
#: value would be accepted here and fail later, inside an engine.
MAX_SETTING_DURATION_MS = 100 * 365 * 24 * 3600 * 1000


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


def _dotted_paths(value: object) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(p, str) and p for p in value)


def _int_at_least(value: object, minimum: int) -> bool:
    """An ``int`` (not a ``bool``) of at least ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def build_settings(user: dict[str, Any]) -> tuple[WeftSettings, list[SettingsProblem]]:
    """Merge ``user`` over DEFAULTS and validate; returns the settings and every problem."""
    problems: list[SettingsProblem] = []
    for key in user:
        if key not in DEFAULTS:
            problems.append(
                SettingsProblem(
                    CHECK_IDS["unknown-key"],
                    f"WEFT[{key!r}] is not a weft-django setting",
                    hint="Known keys: " + ", ".join(DEFAULTS),
                )
            )
    merged = {**DEFAULTS, **{k: v for k, v in user.items() if k in DEFAULTS}}
    marked = _process_transport
    if marked is not None:
        if "TRANSPORT" in user and user["TRANSPORT"] != marked:
            problems.append(
                SettingsProblem(
                    CHECK_IDS["transport-conflicts-with-install"],
                    f"WEFT['TRANSPORT'] is {user['TRANSPORT']!r} but this process's transport "
                    f"was set to {marked!r} by weft_django.celery.install(app)",
                    hint=f"Leave TRANSPORT unset (install() sets it) or set it to {marked!r}.",
                )
            )
        merged["TRANSPORT"] = marked

    ownership = merged["OWNERSHIP"]
    if ownership not in OWNERSHIP_MODES:
        problems.append(
            SettingsProblem(
                CHECK_IDS["unknown-ownership"],
                f"WEFT['OWNERSHIP'] is {ownership!r}; it must be one of "
                '"none", "lease" or "workflow-lease"',
            )
        )
        ownership = DEFAULTS["OWNERSHIP"]

    durations: dict[str, int] = {}
    for key in DURATION_KEYS:
        try:
            durations[key] = duration_ms(key, merged[key])
        except ValueError as exc:
            problems.append(SettingsProblem(CHECK_IDS["bad-duration"], str(exc)))
            durations[key] = _default_ms(key)

    for prefix in ("CLAIM", "LEASE"):
        ids = (
            CHECK_IDS[f"{prefix.lower()}-renew-not-below-ttl"],
            CHECK_IDS[f"{prefix.lower()}-ttl-below-three-renewals"],
        )
        ttl, renew = durations[f"{prefix}_TTL"], durations[f"{prefix}_RENEW_INTERVAL"]
        if renew >= ttl:
            problems.append(
                SettingsProblem(
                    ids[0],
                    f"{prefix}_RENEW_INTERVAL ({_fmt_s(renew)}) must be strictly less than "
                    f"{prefix}_TTL ({_fmt_s(ttl)}), so a renewal fires before it can lapse",
                )
            )
        elif ttl < WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER * renew:
            problems.append(
                SettingsProblem(
                    ids[1],
                    f"{prefix}_TTL ({_fmt_s(ttl)}) must be at least "
                    f"{WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER} × {prefix}_RENEW_INTERVAL "
                    f"({_fmt_s(renew)}) = {_fmt_s(WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER * renew)}",
                )
            )

    def choice(key: str, allowed: tuple[str, ...]) -> Any:
        value = merged[key]
        if value not in allowed:
            problems.append(
                SettingsProblem(
                    CHECK_IDS["bad-choice"],
                    f"WEFT[{key!r}] is {value!r}; it must be one of "
                    + ", ".join(repr(a) for a in allowed),
                )
            )
            return DEFAULTS[key]
        return value

    def positive_int(key: str) -> int:
        value = merged[key]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            problems.append(
                SettingsProblem(
                    CHECK_IDS["not-a-positive-integer"],
                    f"WEFT[{key!r}] must be a positive integer, got {value!r}",
                )
            )
            return cast(int, DEFAULTS[key])
        return value

    retention = merged["RETENTION"]
    retention_ms: int | None = None
    if retention is not None:
        try:
            retention_ms = duration_ms("RETENTION", retention)
        except ValueError as exc:
            problems.append(SettingsProblem(CHECK_IDS["bad-duration"], str(exc)))

    # Far longer than any claim TTL: a record this silent is a dead engine's,
    # so folding it can never race that engine's own heartbeat.
    try:
        record_retention_ms = duration_ms(
            "ENGINE_RECORD_RETENTION", merged["ENGINE_RECORD_RETENTION"]
        )
    except ValueError as exc:
        problems.append(SettingsProblem(CHECK_IDS["bad-engine-record-retention"], str(exc)))
        record_retention_ms = _default_ms("ENGINE_RECORD_RETENTION")

    perms = merged["API_PERMISSION_CLASSES"]
    if not isinstance(perms, list | tuple) or not all(isinstance(p, str) and p for p in perms):
        problems.append(
            SettingsProblem(
                CHECK_IDS["bad-permission-classes"],
                f"WEFT['API_PERMISSION_CLASSES'] must be a list of dotted paths, got {perms!r}",
            )
        )
        perms = DEFAULTS["API_PERMISSION_CLASSES"]

    database = merged["DATABASE"]
    if not isinstance(database, str) or not database:
        problems.append(
            SettingsProblem(
                CHECK_IDS["bad-database-alias"],
                f"WEFT['DATABASE'] must be a database alias, got {database!r}",
            )
        )
        database = DEFAULTS["DATABASE"]

    backends = merged["WAKE_BACKENDS"]
    if not _dotted_paths(backends):
        problems.append(
            SettingsProblem(
                CHECK_IDS["bad-wake-backends"],
                "WEFT['WAKE_BACKENDS'] must be a list of dotted paths of WakeBackend "
                f"subclasses, got {backends!r}",
            )
        )
        backends = DEFAULTS["WAKE_BACKENDS"]

    collector = merged["PROMETHEUS_COLLECTOR"]
    if collector is not None and not isinstance(collector, bool):
        problems.append(
            SettingsProblem(
                CHECK_IDS["bad-prometheus-collector"],
                f"WEFT['PROMETHEUS_COLLECTOR'] must be True, False or None, got {collector!r}",
            )
        )
        collector = None

    def bounded_int(key: str, minimum: int, check: str, meaning: str) -> int:
        """``merged[key]`` if an integer of at least ``minimum``, else its default
        (and a problem naming the value)."""
        value = merged[key]
        if _int_at_least(value, minimum):
            return int(value)
        problems.append(
            SettingsProblem(
                CHECK_IDS[check],
                f"WEFT[{key!r}] must be an integer of at least {minimum} ({meaning}), "
                f"got {value!r}",
            )
        )
        return int(DEFAULTS[key])

    # At least one attempt: 0 would suspend a run before its first turn ran.
    max_failures = bounded_int(
        "TURN_MAX_FAILURES",
        1,
        "bad-turn-max-failures",
        "the turns that may raise before the run is suspended",
    )
    # At least one slot: 0 would leave every activity queued forever.
    activity_concurrency = bounded_int(
        "ACTIVITY_CONCURRENCY",
        1,
        "bad-activity-concurrency",
        "the activity attempts one engine process runs at once",
    )
    # 0 is allowed: it turns the cache off (every turn replays from the journal).
    cache_size = bounded_int(
        "WORKFLOW_CACHE_SIZE",
        0,
        "bad-workflow-cache-size",
        "the workflows an engine keeps live between turns; 0 turns the cache off",
    )

    presence = merged["SESSION_PRESENCE"]
    if not isinstance(presence, bool):
        problems.append(
            SettingsProblem(
                CHECK_IDS["bad-session-presence"],
                f"WEFT['SESSION_PRESENCE'] must be True or False, got {presence!r}",
                hint="False keeps crash detection on the claim TTL alone.",
            )
        )
        presence = DEFAULTS["SESSION_PRESENCE"]

    tracing = merged["TRACING"]
    if not isinstance(tracing, bool):
        problems.append(
            SettingsProblem(
                CHECK_IDS["bad-tracing"],
                f"WEFT['TRACING'] must be True or False, got {tracing!r}",
                hint="True (the default) traces when opentelemetry-api is installed.",
            )
        )
        tracing = DEFAULTS["TRACING"]

    schedules, schedule_problems = parse_declared(merged["SCHEDULES"])
    for kind, message in schedule_problems:
        problems.append(SettingsProblem(CHECK_IDS[kind], message))
    queues, queue_problems = parse_queues(merged["QUEUES"])
    problems += [SettingsProblem(CHECK_IDS["bad-queue"], m) for m in queue_problems]

    search_attributes, attribute_problems = parse_search_attributes(merged["SEARCH_ATTRIBUTES"])
    problems += [SettingsProblem(CHECK_IDS[kind], m) for kind, m in attribute_problems]

    settings = WeftSettings(
        ownership=cast(OwnershipMode, ownership),
        claim_ttl_ms=durations["CLAIM_TTL"],
        claim_renew_interval_ms=durations["CLAIM_RENEW_INTERVAL"],
        lease_ttl_ms=durations["LEASE_TTL"],
        lease_renew_interval_ms=durations["LEASE_RENEW_INTERVAL"],
        lease_wait_timeout_ms=durations["LEASE_WAIT_TIMEOUT"],
        background_tasks=choice("BACKGROUND_TASKS", ("auto", "manual")),
        transport=choice("TRANSPORT", ("polling", "celery")),
        poll_interval_ms=durations["POLL_INTERVAL"],
        worker_concurrency=positive_int("WORKER_CONCURRENCY"),
        celery_eta_horizon_ms=durations["CELERY_ETA_HORIZON"],
        max_payload_bytes=positive_int("MAX_PAYLOAD_BYTES"),
        api_permission_classes=tuple(perms),
        retention_ms=retention_ms,
        database=database,
        wake_backends=tuple(backends),
        prometheus_collector=collector,
        turn_max_failures=max_failures,
        activity_concurrency=activity_concurrency,
        workflow_cache_size=cache_size,
        session_presence=presence,
        schedules=schedules,
        queues=queues,
        replay_check_sample=positive_int("REPLAY_CHECK_SAMPLE"),
        engine_record_retention_ms=record_retention_ms,
        tracing=tracing,
        search_attributes=search_attributes,
        raw=dict(user),
    )
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
    "OWNERSHIP_MODES",
    "WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER",
    "WeftSettings",
    "build_settings",
    "duration_ms",
    "evaluate_settings",
    "get_settings",
    "mark_process_transport",
    "process_transport",
    "settings_problems",
]
