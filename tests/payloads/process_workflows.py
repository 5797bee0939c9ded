"""Workflows of the encrypted-workload process test (``test_encrypted_processes``),
loaded by its ``weft_worker`` children (``tests.procs.worker``).

``pp-proc-all`` puts its input's marker into every kind of payload: the run's
input and result, journal results and errors, heartbeat details, an event, a
stream entry, a child's input and result, a signal, an update's arguments and
answer, an async activity's result. Its search attribute is plaintext by
design (and holds no marker). ``pp-proc-ticked`` is what its schedule starts.
"""

from __future__ import annotations

from typing import Any

from weft_django import activity, activity_info, workflow
from weft_django.errors import ActivityError

IMPORTS = ("tests.payloads.process_workflows",)
SEARCHABLE = "plaintext-searchable-7d2a"


@activity(name="pp-proc-echo")
def pp_proc_echo(value: Any) -> Any:
    return {"echo": value}


@activity(name="pp-proc-fail", retries=0)
def pp_proc_fail(value: Any) -> Any:
    raise ValueError(f"refused {value}")


@activity(name="pp-proc-beat")
def pp_proc_beat(value: Any) -> Any:
    activity_info().heartbeat({"progress": value})
    return {"beat": value}


@activity(name="pp-proc-handout")
def pp_proc_handout(token: str) -> None:
    """The token reaches the outside world; the test completes it by its hash."""


@workflow(name="pp-proc-child")
def pp_proc_child(ctx: Any, data: Any) -> Any:
    echoed = yield ctx.run(pp_proc_echo, data["m"])
    return {"child": echoed}


@workflow(name="pp-proc-ticked")
def pp_proc_ticked(ctx: Any, data: Any) -> Any:
    return (yield ctx.run(pp_proc_echo, data))


@workflow(name="pp-proc-all")
def pp_proc_all(ctx: Any, data: Any) -> Any:
    marker = data["marker"]
    seen: list[Any] = []
    ctx.on_query("seen", lambda: list(seen))

    def add(item: Any) -> Any:
        seen.append(item)
        return {"added": item}

    ctx.on_update("add", add)
    ctx.upsert_search_attributes(tag=SEARCHABLE)
    seen.append((yield ctx.run(pp_proc_echo, marker)))
    try:
        yield ctx.run(pp_proc_fail, marker)
    except ActivityError as exc:
        seen.append(exc.message)
    seen.append((yield ctx.run(pp_proc_beat, marker)))
    ctx.set_event("status", {"m": marker})
    ctx.write_stream("progress", {"note": marker})
    seen.append((yield ctx.start_child("pp-proc-child", {"m": marker})))
    seen.append((yield ctx.wait_for_signal("go")))
    seen.append((yield ctx.async_activity(pp_proc_handout)))
    yield ctx.wait_for_signal("end")
    return seen
