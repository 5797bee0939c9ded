"""Module-level Django tasks of the tests (a worker imports them by module path)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from datetime import timedelta
from pathlib import Path

try:  # Django >= 6.0
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task


@task()
def add(a, b):
    return a + b


@task(priority=10)
def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@task(takes_context=True)
def with_context(context, value):
    return {"id": context.task_result.id, "attempt": context.attempt, "value": value}


class Flaky(Exception):
    pass


@task(retries=2, backoff=timedelta(milliseconds=10), takes_context=True)
def flaky(context, fail_times):
    if context.attempt <= fail_times:
        raise Flaky(f"attempt {context.attempt}")
    return context.attempt


@task(retries=3, backoff=timedelta(milliseconds=10), non_retryable=(KeyError,))
def refuses(key):
    raise KeyError(key)


@task()
def boom():
    raise RuntimeError("boom")


@task()
async def async_double(value):
    await asyncio.sleep(0)
    return value * 2


@task()
def returns_tuple():
    return (1, 2)


@task()
def target_kwarg(target=None):
    return target


@task(takes_context=True)
def slow_marked(context, marker_dir, seconds):
    """Writes a marker file named by the attempt, then sleeps (the SIGKILL test)."""
    Path(marker_dir, f"attempt-{context.attempt}-{os.getpid()}").write_text("started")
    time.sleep(seconds)
    return {"attempt": context.attempt, "pid": os.getpid()}


@task(timeout=timedelta(milliseconds=200))
def too_slow(seconds):
    time.sleep(seconds)
    return "late"


#: Set by a test to let ``waits`` return (in-process engine tests only).
RELEASE = threading.Event()
STARTED = threading.Event()


@task()
def waits():
    STARTED.set()
    RELEASE.wait(30)
    return "finished"
