"""A Django task as weft definitions: a workflow and an activity, both named by
the task's module path (``myapp.tasks.send_welcome``).

The workflow (``task_workflow``) runs the task's function as ONE activity, so
each attempt is fenced like any activity's (a worker killed mid-task has its
task taken over, a deposed worker's result is refused) and its retries,
backoff and timeout are the activity policy (``task.policy_of``).

Registration is late (``engine.definitions.resolvers``): a process registers
a task the first time it meets it -- the enqueuing process at ``enqueue``, a
worker when it picks up a run named by a module path it does not know, a
workflow when it yields ``ctx.run(some_task, ...)``. A worker therefore needs
no import of the task's module beyond what the name says, as Django's own
workers do (``import_string(module_path)``). A name is only imported when the
``TASKS`` setting names this backend, and only a Django ``Task`` whose backend
is a ``WeftTaskBackend`` is registered from a name.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from inspect import iscoroutinefunction
from typing import Any

from weft_django.engine.workflow.commands import RunActivity
from weft_django.engine.workflow.definitions import activity, registry, resolvers, workflow
from weft_django.tasks.compat import api_of_task
from weft_django.tasks.lookup import load_task, weft_aliases
from weft_django.tasks.runner import make_runner
from weft_django.tasks.task import policy_of

_lock = threading.Lock()
#: module path -> the task function registered under it.
_registered: dict[str, Any] = {}


def task_workflow_body(name: str) -> Any:
    def task_workflow(ctx: Any, input: Any) -> Generator[Any, Any, Any]:
        stored = input if isinstance(input, dict) else {}
        args = tuple(stored.get("args") or ())
        kwargs = dict(stored.get("kwargs") or {})
        # The command itself rather than ``ctx.run``: a task keyword argument
        # named ``target`` must reach the task, not ``ctx.run``'s parameter.
        return (yield RunActivity(name, args, kwargs))

    task_workflow.__qualname__ = "task_workflow"
    return task_workflow


def ensure_registered(task: Any) -> str:
    """Register the workflow and activity of ``task`` (once per process); its name."""
    name = task.module_path
    with _lock:
        if _registered.get(name) is task.func and name in registry.workflows:
            return name
    backend = task.get_backend()
    policy = policy_of(task, getattr(backend, "options", {}) or {})
    runner = make_runner(name, is_async=iscoroutinefunction(task.func))
    activity(name=name, **policy)(runner)
    workflow(name)(task_workflow_body(name))
    with _lock:
        _registered[name] = task.func
    return name


def resolve(target: Any) -> str | None:
    """The ``engine.definitions`` resolver: register a Django task met by name or object."""
    if isinstance(target, str):
        if not weft_aliases():
            return None
        task = load_task(target)
        return ensure_registered(task) if task is not None else None
    if api_of_task(target) is not None:  # ctx.run(some_task) / create_schedule(some_task)
        return ensure_registered(target)
    return None


def install() -> None:
    """Add the resolver (idempotent): ``AppConfig.ready``."""
    if resolve not in resolvers:
        resolvers.append(resolve)
