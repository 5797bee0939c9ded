from __future__ import annotations

from django_tasks import task


@task()
def noop(i: int) -> int:
    return i
