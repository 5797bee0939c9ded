"""WeftTaskBackend on one in-process engine (SQLite and PostgreSQL).

Each test enqueues through Django's own API (``Task.enqueue``), drives the
engine of ``weft_env`` and reads the ``TaskResult`` back from storage.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.test import override_settings

from tests.tasks import tasks
from tests.tasks import workflows as _workflows  # noqa: F401  (registers tests.tasks.grow)
from weft_django import client
from weft_django.models import ClaimEvent, WorkflowRun
from weft_django.tasks import compat

pytestmark = pytest.mark.django_db(transaction=True)

API = compat.default_api()
Status = API.TaskResultStatus


def test_enqueue_runs_to_successful_with_a_true_result(weft_env):
    result = tasks.add.enqueue(2, 3)
    assert result.status == Status.READY
    assert result.args == [2, 3] and result.kwargs == {}
    run = WorkflowRun.objects.get(workflow_id=result.id)
    assert run.name == "tests.tasks.tasks.add" and run.status == "pending"
    weft_env.run_until_idle()
    result.refresh()
    assert result.status == Status.SUCCESSFUL
    assert result.return_value == 5
    assert result.attempts == 1
    assert result.worker_ids == [weft_env.engine.engine_id]
    assert result.errors == []
    assert result.enqueued_at <= result.started_at <= result.last_attempted_at
    assert result.last_attempted_at <= result.finished_at
    again = tasks.add.get_result(result.id)
    assert again.return_value == 5 and again.id == result.id
    assert [e.kind for e in ClaimEvent.objects.filter(workflow_id=result.id)] == [
        "acquire",
        "release",
    ]


def test_return_value_is_json_normalised(weft_env):
    result = tasks.returns_tuple.enqueue()
    weft_env.run_until_idle()
    result.refresh()
    assert result.return_value == [1, 2]


def test_a_task_kwarg_named_target_reaches_the_task(weft_env):
    result = tasks.target_kwarg.enqueue(target="x")
    weft_env.run_until_idle()
    assert tasks.target_kwarg.get_result(result.id).return_value == "x"


def test_async_task_is_awaited(weft_env):
    result = tasks.async_double.enqueue(21)
    weft_env.run_until_idle()
    result.refresh()
    assert result.status == Status.SUCCESSFUL and result.return_value == 42


def test_takes_context_sees_its_result_and_attempt(weft_env):
    result = tasks.with_context.enqueue("v")
    weft_env.run_until_idle()
    result.refresh()
    assert result.return_value == {"id": result.id, "attempt": 1, "value": "v"}


def test_retries_record_one_error_per_failed_attempt(weft_env):
    result = tasks.flaky.enqueue(2)
    for _ in range(5):
        weft_env.run_until_idle()
        weft_env.advance(timedelta(seconds=1))
    result.refresh()
    assert result.status == Status.SUCCESSFUL, result.errors
    assert result.return_value == 3
    assert result.attempts == 3
    assert [e.exception_class for e in result.errors] == [tasks.Flaky, tasks.Flaky]
    assert "attempt 1" in result.errors[0].traceback


def test_exhausted_retries_end_failed(weft_env):
    result = tasks.flaky.enqueue(5)
    for _ in range(6):
        weft_env.run_until_idle()
        weft_env.advance(timedelta(seconds=1))
    result.refresh()
    assert result.status == Status.FAILED
    assert result.attempts == 3 and len(result.errors) == 3
    with pytest.raises(ValueError):
        result.return_value  # noqa: B018


def test_non_retryable_fails_at_once(weft_env):
    result = tasks.refuses.enqueue("k")
    weft_env.run_until_idle()
    result.refresh()
    assert result.status == Status.FAILED
    assert result.attempts == 1
    assert [e.exception_class for e in result.errors] == [KeyError]


def test_failure_without_retries(weft_env):
    result = tasks.boom.enqueue()
    weft_env.run_until_idle()
    result.refresh()
    assert result.status == Status.FAILED
    assert result.errors[0].exception_class is RuntimeError
    assert "boom" in result.errors[0].traceback


def test_enqueue_writes_in_the_callers_transaction(weft_env):
    with pytest.raises(RuntimeError), transaction.atomic():
        rolled_back = tasks.add.enqueue(1, 1)
        raise RuntimeError("rollback")
    assert not WorkflowRun.objects.filter(workflow_id=rolled_back.id).exists()
    with pytest.raises(API.TaskResultDoesNotExist):
        tasks.add.get_result(rolled_back.id)
    with transaction.atomic():
        kept = tasks.add.enqueue(1, 1)
    weft_env.run_until_idle()
    assert tasks.add.get_result(kept.id).return_value == 2


def test_run_after_is_a_durable_delayed_start(weft_env):
    at = datetime.fromtimestamp(weft_env.clock() / 1000, UTC) + timedelta(hours=1)
    result = tasks.add.using(run_after=at).enqueue(1, 2)
    weft_env.run_until_idle()
    result.refresh()
    assert result.status == Status.READY
    weft_env.advance(timedelta(hours=1, seconds=1))
    weft_env.run_until_idle()
    result.refresh()
    assert result.status == Status.SUCCESSFUL


def test_cancel_of_a_ready_task_fails_it_naming_the_cancel(weft_env):
    result = tasks.add.enqueue(1, 2)
    client.cancel(result.id, reason="not wanted")
    weft_env.run_until_idle()
    result.refresh()
    assert result.status == Status.FAILED
    assert result.attempts == 0
    assert result.errors[-1].exception_class_path == "weft_django.errors.WorkflowCancelled"
    assert "not wanted" in result.errors[-1].traceback


def test_unknown_and_mismatched_ids(weft_env):
    with pytest.raises(API.TaskResultDoesNotExist):
        tasks.add.get_result(str(uuid.uuid4()))
    with pytest.raises(API.TaskResultDoesNotExist):
        tasks.add.get_result("not a valid id!")
    other = tasks.echo.enqueue()
    with pytest.raises(API.TaskResultMismatch):
        tasks.add.get_result(other.id)


def test_signals_are_sent(weft_env):
    seen = []

    def on(signal_name):
        def receiver(sender, task_result, **kwargs):
            seen.append((signal_name, task_result.id, str(task_result.status)))

        return receiver

    receivers = [on("enqueued"), on("started"), on("finished")]
    API.task_enqueued.connect(receivers[0])
    API.task_started.connect(receivers[1])
    API.task_finished.connect(receivers[2])
    try:
        result = tasks.add.enqueue(1, 2)
        weft_env.run_until_idle()
    finally:
        API.task_enqueued.disconnect(receivers[0])
        API.task_started.disconnect(receivers[1])
        API.task_finished.disconnect(receivers[2])
    assert seen == [
        ("enqueued", result.id, "READY"),
        ("started", result.id, "RUNNING"),
        ("finished", result.id, "SUCCESSFUL"),
    ]


def test_bad_input_is_djangos_exception_and_writes_nothing(weft_env):
    before = WorkflowRun.objects.count()
    with pytest.raises(API.InvalidTask, match="priority=101"):
        tasks.add.using(priority=101)
    with pytest.raises(API.InvalidTask, match="aware"):
        tasks.add.using(run_after=datetime(2030, 1, 1))
    with pytest.raises(API.InvalidTask, match="nowhere"):
        tasks.add.using(queue_name="nowhere")
    with pytest.raises(TypeError, match="object"):
        tasks.add.enqueue(object(), 1)

    def local():
        pass

    with pytest.raises(API.InvalidTask, match=r"module level.*local"):
        API.task_backends["default"].task_class(func=local)

    with pytest.raises(TypeError, match="bogus"):
        API.task_backends["default"].task_class(func=tasks.add.func, bogus=1)
    with pytest.raises(API.InvalidTask, match="retries"):
        API.task_backends["default"].task_class(func=tasks.add.func, retries=-1)
    assert WorkflowRun.objects.count() == before


@override_settings(WEFT={"QUEUES": {"emails": {"concurrency": 2}}})
def test_a_declared_weft_queue_carries_the_task(weft_env):
    with override_settings(
        TASKS={
            "default": {
                "BACKEND": "weft_django.tasks.WeftTaskBackend",
                "QUEUES": ["default", "emails"],
            }
        }
    ):
        task = tasks.add.using(queue_name="emails", priority=5)
        result = task.enqueue(4, 4)
        run = WorkflowRun.objects.get(workflow_id=result.id)
        assert (run.queue, run.priority) == ("emails", 5)


def test_a_workflow_may_run_a_task_as_an_activity(weft_env):
    handle = client.start("tests.tasks.grow", {"fail_times": 1})
    for _ in range(4):
        weft_env.run_until_idle()
        weft_env.advance(timedelta(seconds=1))
    assert handle.result(timeout=1) == 2


def test_priority_orders_the_pickup(weft_env):
    from django.db import connection

    from weft_django import db as store
    from weft_django.engine.maintenance.pickup import pending_due

    low = tasks.add.using(priority=-5).enqueue(1, 1)
    high = tasks.add.using(priority=50).enqueue(2, 2)
    plain = tasks.add.enqueue(3, 3)
    expected = [high.id, plain.id, low.id]
    assert [r.workflow_id for r in pending_due(weft_env.engine)] == expected
    if connection.vendor == "postgresql":  # the batch pickup's own statement
        ops = store.ops("default")
        with transaction.atomic():
            runs = ops.pending_runs_skip_locked("default", weft_env.clock(), [], 10)
        assert [r.workflow_id for r in runs] == expected


def test_a_schedule_may_start_a_task(weft_env):
    described = client.create_schedule(
        "tasks-every-hour", tasks.add, {"args": [20, 22]}, every=timedelta(hours=1)
    )
    assert described["workflow"] == "tests.tasks.tasks.add"
    weft_env.run_until_idle()
    workflow_id = client.trigger_schedule("tasks-every-hour").workflow_id  # a tick, now
    weft_env.run_until_idle()
    result = tasks.add.get_result(workflow_id)
    assert result.status == Status.SUCCESSFUL and result.return_value == 42


def test_aenqueue_and_aget_result(weft_env):
    from asgiref.sync import async_to_sync

    async def enqueue():
        return await tasks.add.aenqueue(5, 6)

    result = async_to_sync(enqueue)()
    weft_env.run_until_idle()

    async def read():
        found = await tasks.add.aget_result(result.id)
        await result.arefresh()
        return found

    found = async_to_sync(read)()
    assert found.return_value == 11 and result.return_value == 11


def test_a_timed_out_attempt_is_a_timeout_error(weft_env):
    result = tasks.too_slow.enqueue(2)
    weft_env.run_until_idle()
    result.refresh()
    assert result.status == Status.FAILED
    assert result.attempts == 1
    assert [e.exception_class for e in result.errors] == [TimeoutError], json.dumps(
        WorkflowRun.objects.get(workflow_id=result.id).error
    )


def test_the_backend_says_what_it_supports():
    backend = API.task_backends["default"]
    assert type(backend).__name__ == "WeftTaskBackend"
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority
    assert backend.api is API


def test_the_system_check_names_an_undeclared_queue():
    from weft_django.tasks.checks import check_tasks_settings

    with override_settings(
        TASKS={
            "default": {
                "BACKEND": "weft_django.tasks.WeftTaskBackend",
                "QUEUES": ["default", "reports"],
            }
        }
    ):
        errors = check_tasks_settings()
    assert [e.id for e in errors] == ["weft.E060"]
    assert "'reports'" in errors[0].msg


def test_cancel_of_a_running_task_fails_it_and_drops_its_result(weft_env):
    import threading

    tasks.STARTED.clear()
    tasks.RELEASE.clear()
    finished = []

    def on_finished(sender, task_result, **kwargs):
        finished.append(str(task_result.status))

    result = tasks.waits.enqueue()

    def cancel_when_started():
        from django.db import connections

        try:
            assert tasks.STARTED.wait(30)
            client.cancel(result.id, reason="operator")
        finally:
            tasks.RELEASE.set()  # the abandoned thread returns; its value is dropped
            connections.close_all()

    canceller = threading.Thread(target=cancel_when_started)
    canceller.start()
    API.task_finished.connect(on_finished)
    try:
        weft_env.run_until_idle()
        canceller.join(30)
        weft_env.run_until_idle()
    finally:
        API.task_finished.disconnect(on_finished)
    result.refresh()
    assert result.status == Status.FAILED
    assert result.attempts == 1
    assert result.errors[-1].exception_class_path == "weft_django.errors.WorkflowCancelled"
    assert "operator" in result.errors[-1].traceback
    assert "SUCCESSFUL" not in finished
