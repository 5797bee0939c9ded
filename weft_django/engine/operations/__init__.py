"""External transitions (SPEC §2, §4.4, §4.5): writes any process may commit, without
owning the workflow -- starts, ``signal_with_start``, cancels, stops (they rotate the
claim, ending the current owner's right to the workflow), waking writes (they bump
``wake_seq``) and their bulk forms. Each goes through ``_loop``'s read -> check -> commit
-> retry, and every durable write through the conditional batch.
"""

from __future__ import annotations

from weft_django.engine.operations._loop import MAX_ATTEMPTS, latest_run
from weft_django.engine.operations.cancel import cancel, end_cancel_grace
from weft_django.engine.operations.purge import purge_ids
from weft_django.engine.operations.stop import (
    force_release,
    purge,
    purge_older_than,
    suspend,
    timeout,
)
from weft_django.engine.operations.wake import (
    resume,
    retry,
    settle_async,
    settle_async_hash,
    signal,
)

__all__ = [
    "MAX_ATTEMPTS",
    "cancel",
    "end_cancel_grace",
    "force_release",
    "latest_run",
    "purge",
    "purge_ids",
    "purge_older_than",
    "resume",
    "retry",
    "settle_async",
    "settle_async_hash",
    "signal",
    "suspend",
    "timeout",
]
