"""``manage.py weft_worker``: a standalone engine (SPEC §2 "Engines").

Runs until SIGTERM/SIGINT, then stops taking turns, finishes in-flight turns
up to ``--grace`` seconds, releases every claim (so another engine takes
over at once, without waiting for expiry), marks its ``EngineRecord``
stopped and exits 0. Logs one line per event; an ownership warning's line
ends with its structured fields (``[event=workflow_claim_lost
during=renewal …]``), and since every weft warning is logged, the duplicate
``warnings.warn`` copy on stderr is silenced in this process. A start-up
gate that refuses (SPEC §4.3) exits 1 with its message, having written
nothing.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import warnings
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from weft_django.errors import OwnershipModeMismatchError
from weft_django.management import checked_args as checked
from weft_django.ownership.codec import MAX_ENGINE_ID_LENGTH
from weft_django.warnings import WeftWarning


class _Formatter(logging.Formatter):
    """One plain line; the structured fields of a weft warning appended."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, "weft", None)
        if isinstance(fields, dict):
            shown = " ".join(
                f"{k}={v}" for k, v in fields.items() if k != "workflow_id" and v is not None
            )
            line = f"{line} [{shown}]"
        return line


class Command(BaseCommand):
    help = "Run a weft-django engine until SIGTERM."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--grace", type=float, default=10.0, help="seconds to finish turns")
        parser.add_argument(
            "--engine-id", default=None, help="engine id (default: unique per boot)"
        )
        parser.add_argument("--concurrency", type=int, default=None, help="WORKER_CONCURRENCY")
        parser.add_argument("--log-level", default="INFO")
        parser.add_argument(
            "--queues",
            default=None,
            help="comma-separated queues of WEFT['QUEUES'] this engine admits (default: all)",
        )
        parser.add_argument(
            "--exclude-queues",
            default=None,
            help="comma-separated queues of WEFT['QUEUES'] this engine does not admit",
        )
        parser.add_argument(
            "--no-listen",
            action="store_true",
            help="do not LISTEN for NOTIFY wakes (PostgreSQL); rely on polling alone",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from weft_django.conf import get_settings
        from weft_django.engine import Engine
        from weft_django.engine.queues.serving import parse_served
        from weft_django.engine.scheduling.local import LocalScheduler

        # Every typed value is checked before logging is touched or an engine built.
        level = checked.log_level(options["log_level"])
        grace = checked.seconds("--grace", options["grace"])
        if options["engine_id"] is not None:
            checked.text("--engine-id", options["engine_id"], MAX_ENGINE_ID_LENGTH)
        overrides: dict[str, Any] = {}
        if options["concurrency"] is not None:
            overrides["worker_concurrency"] = checked.count(
                "--concurrency", options["concurrency"], 1, 10_000
            )
        try:
            served = parse_served(
                get_settings().queues, options["queues"], options["exclude_queues"]
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self._configure_logging(level)
        engine = Engine(
            engine_id=options["engine_id"],
            scheduler=LocalScheduler(listens=not options["no_listen"]),
            **overrides,
        )
        engine.served_queues = served
        stop = threading.Event()

        def on_signal(signum: int, frame: Any) -> None:
            logging.getLogger("weft_django.engine").info("received signal %s; stopping", signum)
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        try:
            engine.start()
        except (OwnershipModeMismatchError, ImproperlyConfigured) as exc:
            # A start-up gate refused (SPEC §4.3): nothing was written; say why, exit 1.
            logging.getLogger("weft_django.engine").error("engine refused to start: %s", exc)
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc
        self.stdout.write(f"weft_worker {engine.engine_id} running (ownership={engine.ownership})")
        self.stdout.flush()
        while not stop.wait(0.5):
            if engine.halted:
                self.stderr.write("engine halted (lease lost)")
                break
        engine.dispose(grace=grace)
        self.stdout.write(f"weft_worker {engine.engine_id} stopped")
        self.stdout.flush()

    @staticmethod
    def _configure_logging(level: str) -> None:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(_Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        root = logging.getLogger("weft_django")
        root.handlers = [handler]
        root.setLevel(level.upper())
        root.propagate = False
        warnings.simplefilter("ignore", WeftWarning)  # each one is logged above
