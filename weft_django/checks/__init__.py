"""System checks with stable ids (SPEC §3). They never touch the database (the
one exception, ``checks.replay``, runs only under ``check --deploy``).

weft.E001  unknown OWNERSHIP            weft.E002  bad duration
weft.E003  CLAIM renew >= TTL           weft.E004  CLAIM TTL < 3 × renew
weft.E005  LEASE renew >= TTL           weft.E006  LEASE TTL < 3 × renew
weft.E007  unknown WEFT key             weft.E008  BACKGROUND_TASKS/TRANSPORT not a choice
weft.E010  SQLite without IMMEDIATE/EXCLUSIVE transactions
weft.E011  a database other than PostgreSQL or SQLite in a fencing mode
weft.E012  PostgreSQL isolation stricter than READ COMMITTED
weft.E013  OWNERSHIP="none" with Celery  weft.E014  unsupported Celery pool
weft.E015  WEFT['DATABASE'] names no configured database
weft.E048  a fencing mode on a backend whose features say supports_transactions=False
weft.E016  settings.WEFT is not a dict   weft.E017  TRANSPORT disagrees with install(app)
weft.E018  not a positive integer        weft.E019  API_PERMISSION_CLASSES not dotted paths
weft.E020  DATABASE not an alias         weft.E021  WAKE_BACKENDS not dotted paths
weft.E022  PROMETHEUS_COLLECTOR not a bool
weft.E023  TURN_MAX_FAILURES not an integer >= 1
weft.E024  ACTIVITY_CONCURRENCY not an integer >= 1
weft.E025  WORKFLOW_CACHE_SIZE not an integer >= 0
weft.E027  SCHEDULES (or an entry) has the wrong shape, or an id is invalid
weft.E028  a SCHEDULES entry has a bad value (cron, timezone, every, overlap, ...)
weft.E029  a SCHEDULES entry names a workflow no @workflow registers
weft.E030  a malformed WEFT['QUEUES'] entry  weft.E031  a definition names an undeclared queue
weft.E032  QUEUES without OWNERSHIP="workflow-lease"
weft.E036  ENGINE_RECORD_RETENTION not a duration  weft.E040  TRACING not a bool
weft.E045  SEARCH_ATTRIBUTES not a dict (or over 100 names)
weft.E046  a bad search attribute name   weft.E047  an unknown search attribute type
weft.E049  MAX_RECOVERY_ATTEMPTS not an integer >= 1
weft.E070  a PAYLOAD_CODECS path that does not import
weft.E071  an ENCRYPTION_KEYS entry that is not a Fernet key (its index named)
weft.E072  PAYLOAD_STORAGE alias not in STORAGES, a threshold above MAX_PAYLOAD_BYTES
weft.E034/E035  routed activities without Celery / without a routing app (``checks.routing``)
weft.W050  (``check --deploy`` only) a live run would break under this code (``checks.replay``)
weft.W051  (``check --deploy`` only) the replay check could not read the database

Every check is registered here, in one style; each lives in the module of
its subject (``settings``, ``queues``, ``routing``, ``replay``).
"""

from __future__ import annotations

from django.core import checks

from weft_django.checks.payloads import check_payloads
from weft_django.checks.queues import check_queues, check_unserved_queues
from weft_django.checks.replay import check_live_runs_replay
from weft_django.checks.routing import check_routed_activities
from weft_django.checks.settings import check_database, check_weft_settings

checks.register("weft")(check_weft_settings)
checks.register("weft")(check_payloads)
checks.register("weft")(check_queues)
checks.register("weft", deploy=True)(check_unserved_queues)
checks.register("weft")(check_routed_activities)
checks.register("weft", "weft_replay", deploy=True)(check_live_runs_replay)

__all__ = [
    "check_database",
    "check_live_runs_replay",
    "check_queues",
    "check_routed_activities",
    "check_weft_settings",
]
