"""The routed activity of the Celery tests, imported only by worker processes.

``celery.gpu_square`` runs on the ``gpu`` queue. It records a ``SideEffect``
of kind ``gpu-start`` when an attempt starts and ``gpu-done`` when it
returns (key ``<key>|<attempt>|<pid>``), fails its first ``fail`` attempts,
and sleeps ``sleep_first`` seconds in attempt 1 (a worker can be killed
then).
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

from weft_django import activity, activity_info

#: Short enough for a test to wait for, long enough for a loaded machine.
TIMEOUT = timedelta(seconds=8)


def _record(kind: str, key: str) -> None:
    from project.demo.models import SideEffect

    SideEffect.objects.create(kind=kind, key=f"{key}|{activity_info().attempt}|{os.getpid()}")


@activity(name="celery.gpu_square", celery_queue="gpu", timeout=TIMEOUT, retries=2, backoff=0)
def gpu_square(data: dict[str, Any]) -> dict[str, Any]:
    info = activity_info()
    _record("gpu-start", data["key"])
    if info.attempt <= int(data.get("fail", 0)):
        raise ConnectionError(f"gpu busy (attempt {info.attempt})")
    if info.attempt == 1 and data.get("sleep_first"):
        time.sleep(float(data["sleep_first"]))
    _record("gpu-done", data["key"])
    return {"square": data["x"] ** 2, "attempt": info.attempt, "pid": os.getpid()}
