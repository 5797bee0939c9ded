"""The workflow of the schedule process tests (imported by the test process
and, through ``tests.procs.worker`` / ``celery -I``, by every child)."""

from __future__ import annotations

from typing import Any

from weft_django import workflow


@workflow(name="sched-proc-echo")
def sched_proc_echo(ctx: Any, data: Any) -> Any:
    return data
