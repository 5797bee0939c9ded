"""A scraper: one OS process that scrapes the cluster collector in a loop.

Run as ``python -m tests.procs.metrics_scraper STOP_FILE`` with cwd at the
repository root and the test database's ``DATABASE_URL`` in the environment
(``tests.support.child_env``). It prints ``READY``, then one line per scrape
(the summed ``weft_workflow_claim_attempts_total{outcome="acquired"}``) until
``STOP_FILE`` exists, then ``DONE``. The parent prunes meanwhile and checks
that no scrape saw the counter move.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    stop = Path(argv[0])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from weft_django.contrib import prometheus

    registry = CollectorRegistry()
    prometheus.register(registry)
    print("READY", flush=True)
    while not stop.exists():
        text = generate_latest(registry).decode()
        value = next(
            s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == "weft_workflow_claim_attempts_total"
            and s.labels == {"outcome": "acquired"}
        )
        print(int(value), flush=True)
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
