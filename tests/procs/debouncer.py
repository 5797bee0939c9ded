"""``python -m tests.procs.debouncer TAG CALLS``: ``client.debounce`` CALLS times
for one key, each input ``[TAG, i]``, after a barrier file appears (so the
processes call together); prints each returned workflow id, one a line."""

from __future__ import annotations

import os
import sys
import time


def main(tag: str, calls: int, barrier: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from weft_django import client, workflow

    @workflow(name="deb-target")
    def deb_target(ctx, data):
        return data
        yield

    deadline = time.monotonic() + 30
    while not os.path.exists(barrier) and time.monotonic() < deadline:
        time.sleep(0.005)
    for i in range(calls):
        handle = client.debounce("deb-target", [tag, i], key="burst", period=10.0)
        print(handle.workflow_id, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
