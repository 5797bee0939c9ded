"""``bench_enqueue N``: enqueue N ``noop`` tasks one by one (each its own commit)."""

from __future__ import annotations

import json
import time

from django.core.management.base import BaseCommand

from benchmarks.tasksdb_peer.tasks import noop


class Command(BaseCommand):
    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("n", type=int)

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        began = time.monotonic()
        for i in range(options["n"]):
            noop.enqueue(i)
        self.stdout.write(json.dumps({"enqueue_s": time.monotonic() - began}))
