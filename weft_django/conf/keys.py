"""The ``WEFT`` keys: one row per key, and every per-key table derived from the rows.

Invariant protected: each key is described once. Its row, a field of
``Keys``, gives the key's name, its default as a user writes it, the
parser that turns a user's value into the field's typed value, the kind of
problem (``CHECK_IDS``) a refused value is, and the one-line description
the reference docs show. ``WeftSettings`` inherits these
fields, and ``DEFAULTS``, ``DESCRIPTIONS`` and ``build_settings`` read the
rows; nothing else lists the keys. The field order is the documented order
(the reference page and the "Known keys" hint follow it).
"""

# RUF009: each ``key(...)`` default of ``Keys`` is a ``dataclasses.field`` (a
# field specifier), not a default shared between instances.
# ruff: noqa: RUF009

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Final, Literal, get_args

from weft_django.kernel.attribute_types import AttributeType
from weft_django.kernel.queue_spec import QueueSpec
from weft_django.kernel.schedule_spec import ScheduleSpec

from . import parse
from .parse import Parser

OwnershipMode = Literal["none", "lease", "workflow-lease"]
OWNERSHIP_MODES: tuple[OwnershipMode, ...] = get_args(OwnershipMode)
BackgroundTasks = Literal["auto", "manual"]
TransportName = Literal["polling", "celery"]

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
    "bad-max-recovery-attempts": "weft.E049",
    "bad-payload-codecs": "weft.E070",
    "bad-encryption-keys": "weft.E071",
    "bad-payload-storage": "weft.E072",
}


@dataclass(frozen=True)
class Key:
    """One ``WEFT`` key."""

    name: str
    #: As a user would write it (durations in seconds); ``parse`` turns it
    #: into the field's default.
    default: Any
    parse: Parser
    #: The ``CHECK_IDS`` kind of a refused value.
    check: str
    description: str
    #: Shown with a refused value's message.
    hint: str | None = None
    #: The ``WeftSettings`` attribute (set from the field this row defines).
    attr: str = ""

    def parsed_default(self) -> Any:
        return self.parse(self.name, self.default)


def key(
    name: str,
    default: Any,
    parser: Parser,
    check: str,
    description: str,
    *,
    hint: str | None = None,
    compare: bool = True,
) -> Any:
    """The field of a ``Keys`` row: its default is ``default`` parsed (a fresh
    copy per instance when mutable), and its metadata holds the ``Key``."""
    row = Key(name, default, parser, check, description, hint)
    metadata = {"key": row}
    value = row.parsed_default()
    if value.__hash__ is None:  # a dict: dataclasses refuse a shared mutable default
        return field(default_factory=row.parsed_default, compare=compare, metadata=metadata)
    return field(default=value, compare=compare, metadata=metadata)


@dataclass(frozen=True)
class Keys:
    """The typed settings, one field per ``WEFT`` key (durations in integer ms)."""

    ownership: OwnershipMode = key(
        "OWNERSHIP",
        "workflow-lease",
        parse.choice(*OWNERSHIP_MODES, prose=True),
        "unknown-ownership",
        '"none", "lease" or "workflow-lease" (per-workflow fenced claims)',
    )
    claim_ttl_ms: int = key(
        "CLAIM_TTL", 30, parse.duration_ms, "bad-duration", "a claim's lifetime after each renewal"
    )
    claim_renew_interval_ms: int = key(
        "CLAIM_RENEW_INTERVAL",
        5,
        parse.duration_ms,
        "bad-duration",
        "renewal period; the Celery polling backstop",
    )
    lease_ttl_ms: int = key(
        "LEASE_TTL",
        30,
        parse.duration_ms,
        "bad-duration",
        'the store-wide lease\'s lifetime ("lease" mode)',
    )
    lease_renew_interval_ms: int = key(
        "LEASE_RENEW_INTERVAL",
        5,
        parse.duration_ms,
        "bad-duration",
        'the store-wide lease\'s renewal period ("lease" mode)',
    )
    lease_wait_timeout_ms: int = key(
        "LEASE_WAIT_TIMEOUT",
        60,
        parse.duration_ms,
        "bad-duration",
        "how long a standby engine waits for the lease",
    )
    background_tasks: BackgroundTasks = key(
        "BACKGROUND_TASKS",
        "auto",
        parse.choice(*get_args(BackgroundTasks)),
        "bad-choice",
        '"manual": the host drives run_maintenance()',
    )
    transport: TransportName = key(
        "TRANSPORT",
        "polling",
        parse.choice(*get_args(TransportName)),
        "bad-choice",
        'set to "celery" by install(app)',
    )
    poll_interval_ms: int = key(
        "POLL_INTERVAL",
        0.2,
        parse.duration_ms,
        "bad-duration",
        "polling period of a standalone engine",
    )
    worker_concurrency: int = key(
        "WORKER_CONCURRENCY",
        4,
        parse.positive_int,
        "not-a-positive-integer",
        "turns an engine drives at once",
    )
    celery_eta_horizon_ms: int = key(
        "CELERY_ETA_HORIZON",
        60,
        parse.duration_ms,
        "bad-duration",
        "a sleep is handed to Celery only once due within this",
    )
    max_payload_bytes: int = key(
        "MAX_PAYLOAD_BYTES",
        256 * 1024,
        parse.positive_int,
        "not-a-positive-integer",
        "inputs, results, signals, errors",
    )
    api_permission_classes: tuple[str, ...] = key(
        "API_PERMISSION_CLASSES",
        ("rest_framework.permissions.IsAdminUser",),
        parse.dotted_paths("dotted paths"),
        "bad-permission-classes",
        "DRF permission classes for the API",
    )
    retention_ms: int | None = key(
        "RETENTION",
        None,
        parse.optional_duration_ms,
        "bad-duration",
        "purge terminal runs older than this",
    )
    database: str = key(
        "DATABASE",
        "default",
        parse.database_alias,
        "bad-database-alias",
        "the alias every weft query uses",
    )
    wake_backends: tuple[str, ...] = key(
        "WAKE_BACKENDS",
        ("weft_django.transports.notify.NotifyBackend",),
        parse.dotted_paths("dotted paths of WakeBackend subclasses"),
        "bad-wake-backends",
        "dotted paths of the wake backends (WakeBackend subclasses) to install",
    )
    #: ``None``: decide by whether ``django_prometheus`` is installed.
    prometheus_collector: bool | None = key(
        "PROMETHEUS_COLLECTOR",
        None,
        parse.optional_boolean,
        "bad-prometheus-collector",
        "register the cluster collector with prometheus_client "
        "(None: when django_prometheus is installed)",
    )
    # At least one attempt: 0 would suspend a run before its first turn ran.
    turn_max_failures: int = key(
        "TURN_MAX_FAILURES",
        5,
        parse.int_at_least(1, "the turns that may raise before the run is suspended"),
        "bad-turn-max-failures",
        "turns in a row that may raise out of the engine (retried with "
        "backoff) before the run is suspended with the error",
    )
    # At least one: 0 would suspend a run before any engine's death was seen.
    max_recovery_attempts: int = key(
        "MAX_RECOVERY_ATTEMPTS",
        5,
        parse.int_at_least(1, "the turns in a row that may die with their engine"),
        "bad-max-recovery-attempts",
        "turns of a run in a row that may end with the death of their engine "
        "(no journal entry recorded in between) before the run is suspended "
        "with CrashLoopError",
    )
    # At least one slot: 0 would leave every activity queued forever.
    activity_concurrency: int = key(
        "ACTIVITY_CONCURRENCY",
        16,
        parse.int_at_least(1, "the activity attempts one engine process runs at once"),
        "bad-activity-concurrency",
        "activity attempts one engine process (or one Celery pool process) "
        "runs at once; separate from WORKER_CONCURRENCY",
    )
    # 0 is allowed: it turns the cache off (every turn replays from the journal).
    workflow_cache_size: int = key(
        "WORKFLOW_CACHE_SIZE",
        1000,
        parse.int_at_least(
            0, "the workflows an engine keeps live between turns; 0 turns the cache off"
        ),
        "bad-workflow-cache-size",
        "workflows whose live generator an engine (or one Celery pool "
        "process) keeps between turns (0 turns the cache off)",
    )
    session_presence: bool = key(
        "SESSION_PRESENCE",
        True,
        parse.boolean,
        "bad-session-presence",
        "PostgreSQL: each engine holds a session-level advisory lock, so a "
        "killed engine's claims are taken over at once, not after CLAIM_TTL (ignored on SQLite)",
        hint="False keeps crash detection on the claim TTL alone.",
    )
    schedules: tuple[ScheduleSpec, ...] = key(
        "SCHEDULES",
        {},
        parse.schedules,
        "bad-schedules",
        "schedules declared in code (id -> workflow, cron or every, ...), synced "
        "when an engine boots; a removed one is paused",
    )
    queues: dict[str, QueueSpec] = key(
        "QUEUES",
        None,
        parse.queues,
        "bad-queue",
        "flow control: {name: {concurrency, per_key_concurrency, rate, parked_holds_slot}}",
        compare=False,
    )
    replay_check_sample: int = key(
        "REPLAY_CHECK_SAMPLE",
        100,
        parse.positive_int,
        "not-a-positive-integer",
        "live runs `check --deploy` replays against the code (weft.W050), "
        "spread over every live workflow name",
    )
    # Far longer than any claim TTL: a record this silent is a dead engine's,
    # so folding it can never race that engine's own heartbeat.
    engine_record_retention_ms: int = key(
        "ENGINE_RECORD_RETENTION",
        7 * 24 * 3600,
        parse.duration_ms,
        "bad-engine-record-retention",
        "EngineRecords silent this long are folded into the metric totals "
        "and deleted at engine boot (counters stay monotonic)",
    )
    #: Spans when opentelemetry is importable (``engine.tracing``).
    tracing: bool = key(
        "TRACING",
        True,
        parse.boolean,
        "bad-tracing",
        "OpenTelemetry spans for starts, turns, activity attempts and runs when "
        "opentelemetry-api is installed (the otel extra); False turns them off",
        hint="True (the default) traces when opentelemetry-api is installed.",
    )
    #: ``{name: type}`` (``kernel.attribute_types``).
    search_attributes: dict[str, AttributeType] = key(
        "SEARCH_ATTRIBUTES",
        {},
        parse.search_attributes,
        "bad-search-attributes",
        "declared search attributes {name: type} (str, int, float, bool, "
        "datetime) that ctx.upsert_search_attributes sets and list_runs / the API / the admin "
        "filter on",
        compare=False,
    )
    #: Dotted paths of ``weft_django.codecs.PayloadCodec`` classes, applied in order.
    payload_codecs: tuple[str, ...] = key(
        "PAYLOAD_CODECS",
        [],
        parse.dotted_paths("codec classes (dotted paths)"),
        "bad-payload-codecs",
        "codec classes applied in order to every stored payload (weft_django.codecs.Encrypt "
        "encrypts); search attributes stay plaintext",
    )
    encryption_keys: tuple[str, ...] = key(
        "ENCRYPTION_KEYS",
        [],
        parse.strings,
        "bad-encryption-keys",
        "Fernet keys of weft_django.codecs.Encrypt: the first encrypts, every one decrypts",
        compare=False,
    )
    payload_storage: parse.PayloadStorage | None = key(
        "PAYLOAD_STORAGE",
        None,
        parse.payload_storage,
        "bad-payload-storage",
        'None or {"STORAGE": alias in STORAGES, "THRESHOLD_BYTES": 65536}: larger stored '
        "payloads go to that storage (content-addressed, after the codecs)",
    )


#: The rows, in documented order, each knowing its ``WeftSettings`` attribute.
KEYS: Final[tuple[Key, ...]] = tuple(replace(f.metadata["key"], attr=f.name) for f in fields(Keys))

#: Each key's default, as a user would write it.
DEFAULTS: dict[str, Any] = {k.name: k.default for k in KEYS}

#: One line per key, used by the reference docs.
DESCRIPTIONS: dict[str, str] = {k.name: k.description for k in KEYS}

#: The required durations (weft.E002); ``RETENTION`` may be ``None`` and
#: ``ENGINE_RECORD_RETENTION`` has its own id.
DURATION_KEYS: Final[tuple[str, ...]] = tuple(
    k.name for k in KEYS if k.parse is parse.duration_ms and k.check == "bad-duration"
)

__all__ = [
    "CHECK_IDS",
    "DEFAULTS",
    "DESCRIPTIONS",
    "DURATION_KEYS",
    "KEYS",
    "OWNERSHIP_MODES",
    "BackgroundTasks",
    "Key",
    "Keys",
    "OwnershipMode",
    "TransportName",
]
