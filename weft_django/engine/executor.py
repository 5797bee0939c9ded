"""INTERIM (replaced by the rt-exec branch): a thread per attempt."""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
from collections.abc import Callable
from typing import Any

from weft_django.engine.activities import ActivityOutcome, run_activity
from weft_django.engine.activity_context import ActivityInfo, AttemptControl, activity_scope
from weft_django.engine.definitions import ActivityDefinition


class Attempt:
    def __init__(self, definition: ActivityDefinition, info: ActivityInfo) -> None:
        self.definition = definition
        self.info = info
        assert info.control is not None
        self.control: AttemptControl = info.control
        self.future: concurrent.futures.Future[ActivityOutcome] = concurrent.futures.Future()

    def abandon(self, reason: str) -> None:
        self.control.cancel(reason)


class ActivityExecutor:
    def __init__(self, concurrency: int, *, clock_ms: Callable[[], int], **_: Any) -> None:
        self.concurrency = concurrency

    def submit(
        self,
        definition: ActivityDefinition,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        info: ActivityInfo,
    ) -> Attempt:
        attempt = Attempt(definition, info)
        context = contextvars.copy_context()

        def target() -> None:
            with activity_scope(info):
                outcome = run_activity(definition, args, kwargs)
            attempt.future.set_result(outcome)

        threading.Thread(target=context.run, args=(target,), daemon=True).start()
        return attempt

    def shutdown(self, wait: bool = False) -> None:
        pass

    @property
    def abandoned_threads(self) -> int:
        return 0
