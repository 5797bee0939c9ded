"""A task of the django-tasks backport, whatever Django provides (Wagtail's case on 6.x)."""

from __future__ import annotations

from django_tasks import task


@task()
def multiply(a, b):
    return a * b
