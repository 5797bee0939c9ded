"""A test kit for your own workflows (SPEC §6): no sleeping, no workers.

``WorkflowTestEnvironment`` gives an ``Engine`` on a fake clock in manual
mode: start workflows with ``client``, call ``run_until_idle()`` to drive
every ready turn, ``advance(timedelta)`` to move time (timers fire on the
next ``run_until_idle``), and assert on journals. Use it through the pytest
fixture ``weft_env`` (add ``pytest_plugins = ["weft_django.testing"]`` to
your ``conftest.py``) or the ``WeftTestMixin`` for ``TestCase`` classes.
Tests need the database (``@pytest.mark.django_db(transaction=True)``).

Why a package: pytest is imported only by ``pytest_plugin`` (the fixture),
so a unittest project can import ``WeftTestMixin`` without pytest installed;
``clock``, ``environment`` and ``history`` (``replay_history``: an exported
run replayed in this thread, no database) hold the kit, this module only names it.
"""

from __future__ import annotations

from weft_django.testing.clock import FakeClock
from weft_django.testing.environment import WeftTestMixin, WorkflowTestEnvironment
from weft_django.testing.history import replay_history

#: pytest loads the fixture module when a project names this package in its
#: own ``pytest_plugins``; nothing here imports pytest.
pytest_plugins = ["weft_django.testing.pytest_plugin"]


__all__ = ["FakeClock", "WeftTestMixin", "WorkflowTestEnvironment", "replay_history"]
