"""The trivial task of ``python -m benchmarks tasks``, on ``WeftTaskBackend``
(``project.settings`` names it in ``TASKS``). A worker imports it by module path."""

from __future__ import annotations

try:  # Django >= 6.0
    from django.tasks import task
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task


@task()
def noop(i: int) -> int:
    return i
