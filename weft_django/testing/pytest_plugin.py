"""The pytest side of the test kit: the ``weft_env`` fixture.

The only module of ``weft_django.testing`` that imports pytest, so the rest
of the kit works in a unittest project. Loaded by
``pytest_plugins = ["weft_django.testing"]`` (or by naming this module).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from weft_django.testing.environment import WorkflowTestEnvironment


@pytest.fixture
def weft_env() -> Iterator[WorkflowTestEnvironment]:
    """A ``WorkflowTestEnvironment`` (needs ``django_db(transaction=True)``)."""
    env = WorkflowTestEnvironment()
    try:
        yield env
    finally:
        env.close()
