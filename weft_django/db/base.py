"""Portable store operations and the capability flags of a database vendor.

Why a seam: the claim protocol needs a few statements whose best form differs
per database -- a claim compare-and-swap as one statement, the claims and
runs of a commit locked in one round trip, every held claim renewed in one
statement, the server's clock. The protocol asks ``weft_django.db.ops(alias)``
(as Django code asks ``connection.ops``) and gets a ``StoreOps``: its flags
say what the vendor can do, its methods do it. The forms here use the ORM
or portable SQL and run on any backend; ``postgresql.py`` and ``sqlite.py``
override what their database does better. No module outside ``db/`` branches
on a vendor.

Capability rule (``capability_problems``): weft's conditional batch is safe
on PostgreSQL under READ COMMITTED and on SQLite with IMMEDIATE (or
EXCLUSIVE) transactions; a fencing mode on anything else is refused. It
reads only the ``DATABASES`` entry: checking it never opens a connection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from django.core import checks
from django.db import connections, models, transaction

from weft_django.models import WorkflowClaim, WorkflowRun

HolderRow = tuple[str, int, str, int, int]
"""``(workflow_id, epoch, engine_id, expires_at, claimed_at)`` of one held claim."""

ClaimRow = tuple[int, str | None, int | None, int | None]
"""``(epoch, engine_id, expires_at, claimed_at)`` exactly as stored."""


@dataclass(frozen=True)
class GoneClaim:
    """A claim row a bulk takeover locked, and the drivable run of its workflow."""

    workflow_id: str
    run_id: str
    row: ClaimRow


@dataclass(frozen=True)
class LockedClaim:
    """A claim row as a joint lock read it (what ``ClaimCondition`` compares)."""

    epoch: int
    engine_id: str | None
    expires_at: int | None
    claimed_at: int | None


@dataclass(frozen=True)
class LockedRun:
    """A run row as a joint lock read it (what ``RunCondition`` compares)."""

    status: str
    version: int
    wake_seq: int


def table(model: type[models.Model], using: str) -> str:
    """``model``'s table name, quoted for ``using`` (the one quoting convention)."""
    return str(connections[using].ops.quote_name(model._meta.db_table))


class StoreOps:
    """What weft needs from a database beyond the ORM; portable forms."""

    vendor: ClassVar[str] = "unknown"
    #: A claim transition (one claim condition, its claim write and event) can
    #: run as ONE atomic statement whose ``WHERE`` is the condition.
    supports_claim_statement: ClassVar[bool] = False
    #: The claim rows and run rows of a batch can be locked in one round trip,
    #: in the global lock order (claims, then runs, each by key).
    supports_joint_lock: ClassVar[bool] = False
    #: ``LISTEN``/``NOTIFY`` (the NOTIFY wake backend needs it).
    supports_listen_notify: ClassVar[bool] = False
    #: Session-level advisory locks visible to other sessions (``pg_locks``):
    #: an engine's ended session tells others it is gone (``ownership.presence``).
    supports_session_presence: ClassVar[bool] = False
    #: ``FOR UPDATE SKIP LOCKED``: a batch pickup locks pending runs and their
    #: claim rows without waiting for a row another engine is taking.
    supports_skip_locked: ClassVar[bool] = False
    #: A checked batch's writes run as few statements as their shapes allow
    #: (``db.write_statements``): multi-row inserts and updates, and writes
    #: on distinct tables as one statement of data-modifying CTEs.
    supports_coalesced_writes: ClassVar[bool] = False
    #: Each statement of a transaction can be bounded in time (an atomic
    #: activity's deadline): ``set_local_statement_timeout``.
    supports_statement_timeout: ClassVar[bool] = False
    #: A bulk takeover's claim writes can run as one statement: ``bulk_put_claims``.
    supports_bulk_claim_update: ClassVar[bool] = False
    #: A start with nothing in its way is ONE statement: the newest run's read,
    #: the insert and the wake (``insert_start``).
    supports_start_statement: ClassVar[bool] = False

    # -- the start statement -------------------------------------------------
    def insert_start(
        self, run: WorkflowRun, *, after_finished: bool, notify: tuple[str, str] | None, using: str
    ) -> bool:
        """Insert ``run`` unless its workflow's newest run is live (or finished,
        unless ``after_finished``), sending ``notify`` = ``(channel, payload)``
        on commit; ``True`` when inserted. Only called when
        ``supports_start_statement``."""
        raise NotImplementedError

    # -- claim rows ----------------------------------------------------------
    def read_claim(self, using: str, workflow_id: str) -> ClaimRow | None:
        """An unlocked read of one claim row (raw: the ORM's query compilation
        was half of a claim cycle's CPU)."""
        sql = (
            "SELECT epoch, engine_id, expires_at, claimed_at FROM "
            f"{table(WorkflowClaim, using)} WHERE workflow_id = %s"
        )
        with connections[using].cursor() as cursor:
            cursor.execute(sql, [workflow_id])
            row = cursor.fetchone()
        return None if row is None else (row[0], row[1], row[2], row[3])

    def claim_statement(
        self,
        using: str,
        *,
        workflow_id: str,
        epoch: int,
        holder: tuple[str | None, int | None, int | None] | None,
        new_epoch: int,
        new_holder: tuple[str | None, int | None, int | None],
        upsert: bool,
        event: models.Model,
    ) -> bool:
        """Compare-and-set one claim row and insert ``event``, in one statement.

        The row must be at ``epoch`` with exactly ``holder`` (``None``: any
        holder); ``upsert``: a missing row meets the condition too. Returns
        whether it held (and so both writes were applied). Only called when
        ``supports_claim_statement``.
        """
        raise NotImplementedError

    def lock_pending_claims_skip_locked(
        self, using: str, now_ms: int, excluded_queues: Sequence[str], limit: int
    ) -> dict[str, ClaimRow]:
        """The claim rows of up to ``limit`` pending runs due at ``now_ms`` (not
        of ``excluded_queues``), oldest first: ensured, and locked without
        waiting for a row another transaction holds -- the runs themselves are
        not locked (claims before runs). Only called when ``supports_skip_locked``."""
        raise NotImplementedError

    def pending_runs_skip_locked(
        self,
        using: str,
        now_ms: int,
        excluded_queues: Sequence[str],
        limit: int,
        workflow_ids: Sequence[str] | None = None,
    ) -> list[WorkflowRun]:
        """Lock up to ``limit`` pending runs due at ``now_ms`` (not of
        ``excluded_queues``; of ``workflow_ids`` when given), oldest first,
        skipping any row another transaction holds. Only called when
        ``supports_skip_locked``."""
        raise NotImplementedError

    def lock_claims_skip_locked(
        self, using: str, workflow_ids: Sequence[str]
    ) -> dict[str, ClaimRow]:
        """Ensure the claim rows of ``workflow_ids`` (epoch 0, no holder) and
        lock them without waiting: a row another transaction holds is left
        out. Only called when ``supports_skip_locked``."""
        raise NotImplementedError

    def lock_claims_and_runs(
        self,
        using: str,
        claim_ids: Sequence[str],
        run_ids: Sequence[str],
        claims: dict[str, Any],
        runs: dict[str, Any],
    ) -> bool:
        """Lock claims then runs in one round trip, filling ``claims``/``runs``;
        ``False`` when a claim row is missing. Only called when
        ``supports_joint_lock``."""
        raise NotImplementedError

    def lock_gone_claims_skip_locked(
        self, using: str, engine_ids: Sequence[str], run_statuses: Sequence[str], limit: int
    ) -> list[GoneClaim]:
        """Lock, without waiting, up to ``limit`` claim rows held by one of
        ``engine_ids`` whose workflow has a run in ``run_statuses``, in
        workflow-id order; a row another transaction holds is left out. Only
        called when ``supports_skip_locked``."""
        raise NotImplementedError

    # -- renewals ------------------------------------------------------------
    def renew_exact_holders(
        self, using: str, holders: Sequence[HolderRow], new_expires: int
    ) -> set[str]:
        """Set ``expires_at`` on the rows still carrying their exact holder;
        returns the renewed ids. Rows are taken in workflow-id order, the
        global lock order."""
        renewed: set[str] = set()
        rows = WorkflowClaim.objects.using(using)
        with transaction.atomic(using=using):
            for wid, epoch, engine_id, expires_at, claimed_at in sorted(holders):
                if rows.filter(
                    pk=wid,
                    epoch=epoch,
                    engine_id=engine_id,
                    expires_at=expires_at,
                    claimed_at=claimed_at,
                ).update(expires_at=new_expires):
                    renewed.add(wid)
        return renewed

    def renew_engine_rows(
        self,
        using: str,
        engine_id: str,
        new_expires: int,
        *,
        epoch_limit: int,
        timestamp_limit: int,
    ) -> list[tuple[str, int, int]]:
        """Renew every decodable holder row carrying ``engine_id`` (epoch in
        ``[1, epoch_limit)``, times in ``[0, timestamp_limit)``); returns
        ``(workflow_id, epoch, claimed_at)`` of each."""
        matching = WorkflowClaim.objects.using(using).filter(
            engine_id=engine_id,
            epoch__gte=1,
            epoch__lt=epoch_limit,
            expires_at__gte=0,
            expires_at__lt=timestamp_limit,
            claimed_at__gte=0,
            claimed_at__lt=timestamp_limit,
        )
        with transaction.atomic(using=using):
            rows = list(
                matching.select_for_update()
                .order_by("workflow_id")
                .values_list("workflow_id", "epoch", "claimed_at")
            )
            WorkflowClaim.objects.using(using).filter(pk__in=[r[0] for r in rows]).update(
                expires_at=new_expires
            )
        return [(wid, int(epoch), int(claimed_at or 0)) for wid, epoch, claimed_at in rows]

    # -- server and session --------------------------------------------------
    def gone_engines_sql(self, using: str) -> str:
        """The presence watch's statement (``supports_session_presence`` only)."""
        raise NotImplementedError(f"{self.vendor} has no session presence")

    def database_clock_ms(self, using: str) -> int | None:
        """The database server's clock in ms, or ``None`` when it has none."""
        return None

    def bound_idle_transactions(self, connection: Any, limit_ms: int) -> bool:
        """Make the server end this session once it idles inside a transaction
        for ``limit_ms`` (freeing its row locks); ``False`` when the database
        has no such bound."""
        return False

    def set_local_statement_timeout(self, using: str, limit_ms: int) -> str:
        """Bound each statement of the current transaction by ``limit_ms`` and
        return the bound replaced (``supports_statement_timeout`` only)."""
        raise NotImplementedError(f"{self.vendor} has no statement timeout")

    def restore_statement_timeout(self, using: str, before: str) -> None:
        raise NotImplementedError(f"{self.vendor} has no statement timeout")

    # -- bulk takeover ---------------------------------------------------------
    def bulk_put_claims(
        self, using: str, puts: Sequence[tuple[str, int, int, str | None, int | None, int | None]]
    ) -> int:
        """Write each ``(workflow_id, read_epoch, epoch, engine_id, expires_at,
        claimed_at)`` only at its read epoch, in one statement; returns the rows
        written (``supports_bulk_claim_update`` only)."""
        raise NotImplementedError(f"{self.vendor} has no bulk claim update")

    # -- capability ----------------------------------------------------------
    def capability_problems(
        self, alias: str, entry: Mapping[str, Any], ownership: str
    ) -> list[checks.CheckMessage]:
        """Why this database cannot run ``ownership`` safely (empty: it can)."""
        if ownership == "none":
            return []
        return [
            checks.Error(
                f"Database {alias!r} uses {str(entry.get('ENGINE', ''))!r}; "
                f"OWNERSHIP={ownership!r} is supported on PostgreSQL and SQLite only",
                id="weft.E011",
            )
        ]
