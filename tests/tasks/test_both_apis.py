"""One backend class for ``django.tasks`` and the ``django_tasks`` backport.

On Django >= 6.0 with the backport installed (libraries such as Wagtail
enqueue through it), both registries build a ``WeftTaskBackend`` from the one
``TASKS`` setting; each instance speaks its own API, and a task of either runs
on the same engine. On Django 5.2 only the backport exists and the core cases
are skipped.
"""

from __future__ import annotations

import pytest

from weft_django.tasks import compat

pytestmark = pytest.mark.django_db(transaction=True)

backport = compat.api(compat.BACKPORT)
core = compat.api(compat.CORE)


@pytest.mark.skipif(backport is None, reason="the django-tasks backport is not installed")
def test_a_backport_task_runs_and_reads_back_with_backport_classes(weft_env):
    from tests.tasks import backport_tasks

    backend = backport.task_backends["default"]
    assert type(backend).__name__ == "WeftTaskBackend"
    assert backend.api is backport
    assert isinstance(backport_tasks.multiply, backport.Task)
    result = backport_tasks.multiply.enqueue(6, 7)
    assert type(result) is backport.TaskResult
    weft_env.run_until_idle()
    result.refresh()
    assert result.status == backport.TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42
    with pytest.raises(backport.TaskResultDoesNotExist):
        backport_tasks.multiply.get_result("no-such-result")


@pytest.mark.skipif(core is None or backport is None, reason="needs django.tasks and the backport")
def test_core_and_backport_tasks_share_the_engine(weft_env):
    from tests.tasks import backport_tasks, tasks

    assert core.task_backends["default"].api is core
    assert isinstance(tasks.add, core.Task)
    one = tasks.add.enqueue(1, 2)
    two = backport_tasks.multiply.enqueue(3, 4)
    weft_env.run_until_idle()
    assert type(tasks.add.get_result(one.id)) is core.TaskResult
    assert tasks.add.get_result(one.id).return_value == 3
    assert backport_tasks.multiply.get_result(two.id).return_value == 12
    with pytest.raises(core.TaskResultMismatch):
        tasks.add.get_result(two.id)
