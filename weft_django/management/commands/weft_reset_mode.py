"""``manage.py weft_reset_mode``: delete the store's ownership mode marker.

Why it is a command of its own (SPEC §4.3): the marker is what stops an
engine configured with one ``OWNERSHIP`` mode from running against a store
another mode is fencing -- two engines fencing differently can both believe
they own a workflow. Deleting it is therefore an explicit operator action,
refused while any engine may still be running: an ``EngineRecord`` that is
not stopped and heartbeated within 3 × ``CLAIM_TTL``. Engines that booted
with the old mode must all be stopped first; the next engine to boot
establishes its own mode.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from weft_django.conf import get_settings
from weft_django.inspection import alive_engines_q, format_age, reset_mode_window_ms
from weft_django.kernel.clock import wall_ms
from weft_django.models import EngineRecord, OwnershipModeMarker
from weft_django.ownership.gates import reset_mode_marker


class Command(BaseCommand):
    help = "Delete the ownership mode marker (refused while any engine is alive)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--noinput",
            "--no-input",
            action="store_false",
            dest="interactive",
            help="do not ask for confirmation",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        settings = get_settings()
        db = settings.database
        window = reset_mode_window_ms(settings)
        self._refuse_if_alive(db, window)
        marker = OwnershipModeMarker.objects.using(db).first()
        if marker is None:
            self.stdout.write("no ownership mode marker: nothing to reset")
            return
        if options.get("interactive", True):
            answer = input(
                f'Delete the ownership mode marker "{marker.mode}" '
                f"(established at {marker.established_at} ms)? Type 'yes' to continue: "
            )
            if answer.strip().lower() != "yes":
                raise CommandError("reset cancelled")
        # No engine may have booted between the first check and the delete.
        if not reset_mode_marker(
            db,
            marker.mode,
            marker.established_at,
            recheck=lambda using: self._refuse_if_alive(using, window),
        ):
            raise CommandError("the ownership mode marker changed meanwhile; run it again")
        self.stdout.write(
            f'deleted the ownership mode marker "{marker.mode}" '
            f"(established at {marker.established_at} ms); the next engine to boot sets the mode"
        )

    @staticmethod
    def _refuse_if_alive(db: str, window_ms: int) -> None:
        now = wall_ms()
        alive = list(
            EngineRecord.objects.using(db)
            .filter(alive_engines_q(now, window_ms))
            .values_list("engine_id", "heartbeat_at")[:20]
        )
        if alive:
            names = ", ".join(
                f"{engine_id} (heartbeat {format_age((now - beat) / 1000)} ago)"
                for engine_id, beat in alive
            )
            raise CommandError(
                "refusing to reset the ownership mode while engines are alive (not stopped, "
                f"heartbeat within 3 × CLAIM_TTL = {window_ms / 1000:g} s): {names}. "
                "Stop every engine first."
            )
