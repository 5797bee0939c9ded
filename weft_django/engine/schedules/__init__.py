"""Schedules: cron/every ticks fired once each by a fenced system workflow.

The driver workflow and its step (``driver``, ``ticking``), the client calls (``calls``)
and the boot-time sync of ``WEFT["SCHEDULES"]`` (``sync``); what a schedule is and when it
ticks is ``weft_django.kernel.schedule_spec``. Importing this package registers the
``weft.schedule`` workflow.
"""

from __future__ import annotations

from weft_django.engine.schedules import driver as driver  # registers weft.schedule

__all__ = ["driver"]
