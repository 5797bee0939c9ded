"""``install(app)`` outside a worker, and what a worker refuses (SPEC §2, §3).

- Importing the project's ``celery.py`` (as a web process, ``migrate`` or
  ``shell`` does) starts nothing — no thread, no broker connection — but
  marks the process's transport as ``"celery"``.
- An explicit conflicting ``WEFT["TRANSPORT"]`` fails validation.
- A worker refuses an unsupported pool (``weft.E014``) and
  ``OWNERSHIP="none"`` (``weft.E013``) at init, with a clear error.

PostgreSQL only (asserted), like the rest of the Celery tests.
"""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.celery.conftest import make_app
from tests.support import REPO_ROOT, child_env, python
from weft_django.conf import get_settings
from weft_django.engine.wakes import backends
from weft_django.transports.celery import identity as node_identity

pytestmark = [pytest.mark.processes]

INERT = """
import os, socket, threading
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
import django
django.setup()
opened = []
real_connect = socket.socket.connect
def spy(self, address):
    opened.append(address)
    return real_connect(self, address)
socket.socket.connect = spy
import project.celery
from django.core.management import call_command
call_command("check", verbosity=0)
from weft_django.conf import get_settings
from weft_django.engine.wakes import backends
print(threading.active_count(), get_settings().transport,
      [b.name for b in backends.all()].count("celery"),
      project.celery.app.conf.worker_direct, opened)
"""


@pytest.mark.django_db(transaction=True)
def test_importing_the_celery_app_starts_nothing(postgres):
    done = subprocess.run(
        [python(), "-c", INERT],
        cwd=REPO_ROOT,
        env=child_env(CELERY_BROKER_URL="redis://127.0.0.1:1/0"),  # unreachable: unused
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "1 celery 1 True []", done.stdout


@pytest.mark.django_db(transaction=True)
def test_a_conflicting_transport_setting_is_an_error(postgres, settings):
    from weft_django.celery import install, uninstall

    settings.WEFT = {"TRANSPORT": "polling"}
    install(make_app("memory://"))
    try:
        assert [b.name for b in backends.all()].count("celery") == 1
        with pytest.raises(ImproperlyConfigured, match="TRANSPORT"):
            get_settings()
    finally:
        uninstall()
    assert get_settings().transport == "polling"
    assert "celery" not in [b.name for b in backends.all()]


def fake_worker(pool_cls: object) -> SimpleNamespace:
    return SimpleNamespace(pool_cls=pool_cls, hostname="fake@host", app=make_app("memory://"))


@pytest.mark.django_db(transaction=True)
def test_pool_names_and_an_unsupported_pool_is_refused(postgres):
    from celery.concurrency.prefork import TaskPool as Prefork
    from celery.concurrency.solo import TaskPool as Solo
    from celery.concurrency.thread import TaskPool as Threads

    assert [node_identity.pool_name(c) for c in (Prefork, Threads, Solo)] == [
        "prefork",
        "threads",
        "solo",
    ]
    for pool in ("gevent", "eventlet"):
        with pytest.raises(ImproperlyConfigured, match=rf"weft\.E014.*{pool}"):
            node_identity.prepare_node(fake_worker(pool), queue="weft")
    minted = node_identity.minted.current
    assert minted is None or minted.node_name != "fake@host"


@pytest.mark.django_db(transaction=True)
def test_ownership_none_is_refused_by_a_worker(postgres, settings):
    settings.WEFT = {"OWNERSHIP": "none"}
    with pytest.raises(ImproperlyConfigured, match=r"weft\.E013"):
        node_identity.prepare_node(fake_worker("prefork"), queue="weft")
