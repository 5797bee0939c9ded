"""Schedules: cron/every ticks, each fired once by a fenced system workflow.

``spec`` lives in the kernel (``weft_django.kernel.schedule_spec``); here: the
driver workflow and its step (``driver``, ``ticking``), the schedule row
writes (``rows``: the client's schedule calls and the sync use them) and the
boot-time sync of ``WEFT["SCHEDULES"]`` (``sync``). Importing this package
registers the ``weft.schedule`` workflow.
"""

from __future__ import annotations

from weft_django.engine.schedules import driver as driver  # registers weft.schedule

__all__ = ["driver"]
