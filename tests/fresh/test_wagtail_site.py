"""A fresh Wagtail 8 site with ``TASKS`` on weft: publishing a page runs
Wagtail's background tasks on ``weft_worker``, and their effects show.

What a Wagtail user does, for real: a brand-new virtualenv gets ``wagtail>=8,<9``
(with its dependencies, from the package registry), the running leg's Django
(so leg 2 is Wagtail on Django 6.1), psycopg and the weft-django wheel built
from this checkout; ``wagtail start mysite``; the settings get
``"weft_django"`` and ``TASKS = {"default": {"BACKEND":
"weft_django.tasks.WeftTaskBackend"}}`` (docs/howto/django-tasks.md,
"Wagtail"); the home page model gets a link to another page (so the reference
index has something to record); ``makemigrations``, ``migrate``.

Then, from ``manage.py shell -c``, a draft child page is created, given its
title and link in a revision, and published: Wagtail (and ``modelsearch``, its
search layer) enqueue through the ``django_tasks`` backport even on Django
6.x, so the runs exist but nothing has run -- the page is in neither the
reference index nor the search index. A ``manage.py weft_worker`` then runs
them; the test waits until every run is completed, reads each task's
``TaskResult`` in another process (through the backport's ``get_result``
and, on Django 6, ``django.tasks``'s too, from the one ``TASKS`` setting) and
expects SUCCESSFUL with the worker's id, and finds the published page in the
reference index (its link) and in search (its published title).

The site's database is its own: on PostgreSQL (the suite's server, whatever
database the suite uses) a ``weft_wagtail_<random>`` database created and
dropped here; with a SQLite suite, a SQLite file with README's options. Every
child runs with ``cwd`` in the temporary folder and an environment without
``PYTHONPATH``, ``DJANGO_SETTINGS_MODULE`` or ``DATABASE_URL``. The worker runs
in its own process group, killed in a ``finally``. Waits are polls bounded by
``HANG_TIMEOUT_S`` (hang protection, not a performance assertion).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django
import pytest

from tests.fresh.support import clean_env, run

pytestmark = [pytest.mark.processes]

HANG_TIMEOUT_S = 60.0  # hang protection only
INSTALL_TIMEOUT_S = 300.0  # pip install from the registry (hang protection)

#: What Wagtail 8 and modelsearch enqueue when a page is saved (and so published).
REFERENCE_TASK = "wagtail.tasks.update_reference_index_task"
SEARCH_TASK = "modelsearch.tasks.insert_or_update_object_task"

#: The home page model of ``wagtail start``, with a link to another page.
HOME_MODELS_PY = """\
from django.db import models

from wagtail.models import Page


class HomePage(Page):
    featured_page = models.ForeignKey(
        "wagtailcore.Page", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
"""

SETTINGS_TAIL = """

# --- weft-django runs Wagtail's background tasks (docs/howto/django-tasks.md) ----
INSTALLED_APPS += {apps!r}
TASKS = {{"default": {{"BACKEND": "weft_django.tasks.WeftTaskBackend"}}}}
DATABASES = {{"default": {database!r}}}
"""

PUBLISH_SNIPPET = """
import json
from home.models import HomePage
from wagtail.models import Page, ReferenceIndex
from weft_django.models import WorkflowRun

def runs():
    return {r.workflow_id: [r.name, r.status, r.input] for r in WorkflowRun.objects.all()}

home = HomePage.objects.get(depth=2)
page = home.add_child(instance=HomePage(title="Draft", slug="weft-news", live=False))
created = runs()
page = HomePage.objects.get(pk=page.pk)
page.title = "Weftpublished tidings"
page.featured_page = home
page.save_revision().publish()
page.refresh_from_db()
everything = runs()
print("PUBLISHED=" + json.dumps({
    "page": page.pk,
    "home": home.pk,
    "live": page.live,
    "title": page.title,
    "on_create": created,
    "on_publish": {k: v for k, v in everything.items() if k not in created},
    "references": ReferenceIndex.get_references_for_object(page).count(),
    "found": [p.pk for p in Page.objects.live().search("Weftpublished")],
}))
"""

STATUS_SNIPPET = """
import json
from weft_django.models import WorkflowRun
print("RUNS=" + json.dumps(dict(WorkflowRun.objects.values_list("workflow_id", "status"))))
"""

RESULTS_SNIPPET = """
import json
from django.utils.module_loading import import_string
from wagtail.models import Page, ReferenceIndex
from weft_django.models import WorkflowRun

try:
    from django.tasks import default_task_backend as core_backend
except ImportError:  # Django 5.2: the backport only
    core_backend = None

results = {}
for run in WorkflowRun.objects.all():
    task = import_string(run.name)  # Wagtail's own task object (django_tasks)
    result = task.get_result(run.workflow_id)
    entry = {
        "status": result.status.name,
        "api": type(result).__module__,
        "task": result.task.module_path,
        "worker_ids": list(result.worker_ids),
        "errors": [e.traceback for e in result.errors],
    }
    if core_backend is not None:
        entry["core_status"] = core_backend.get_result(run.workflow_id).status.name
    results[run.workflow_id] = entry
page = Page.objects.get(pk=PAGE_ID)
references = ReferenceIndex.get_references_for_object(page)
print("RESULTS=" + json.dumps({
    "results": results,
    "references": [
        [r.model_path, r.to_content_type.model_class()._meta.label, r.to_object_id]
        for r in references
    ],
    "found": [p.pk for p in Page.objects.live().search("Weftpublished")],
}))
"""


def _line(out: str, prefix: str) -> Any:
    return json.loads(next(x for x in out.splitlines() if x.startswith(prefix))[len(prefix) :])


@pytest.fixture
def site_database(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The site's own database: a new PostgreSQL database on the suite's server
    (dropped afterwards), or a SQLite file when the suite runs on SQLite."""
    from django.conf import settings

    suite = settings.DATABASES["default"]
    if suite["ENGINE"] != "django.db.backends.postgresql":
        yield {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(tmp_path / "site.sqlite3"),
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
        return
    import psycopg

    name = f"weft_wagtail_{uuid.uuid4().hex[:12]}"
    server = {
        key: suite[key.upper()]
        for key in ("host", "port", "user", "password")
        if suite.get(key.upper())
    }
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            **{key.upper(): value for key, value in server.items()},
        }
    finally:
        with psycopg.connect(dbname="postgres", autocommit=True, **server) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _install(tmp_path: Path, wheel: Path, postgres: bool) -> Path:
    """A new venv with Wagtail 8, this leg's Django and the wheel; its python."""
    env = clean_env(network=True)
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=env)
    py = venv / "bin" / "python"
    requirements = [str(wheel), "wagtail>=8,<9", f"Django=={django.__version__}"]
    if postgres:
        requirements.append(f"psycopg[binary]=={importlib.metadata.version('psycopg')}")
    run(
        [str(py), "-m", "pip", "install", "-q", *requirements],
        cwd=tmp_path,
        env=env,
        timeout=INSTALL_TIMEOUT_S,
    )
    return py


def test_publishing_a_page_runs_wagtails_tasks_on_weft(
    tmp_path: Path, weft_wheel: Path, site_database: dict[str, Any]
) -> None:
    began = time.monotonic()
    postgres = site_database["ENGINE"].endswith("postgresql")
    py = str(_install(tmp_path, weft_wheel, postgres))
    env = clean_env()
    installed = json.loads(
        run(
            [
                py,
                "-c",
                "import json, django, wagtail, weft_django; print(json.dumps({"
                "'django': django.__version__, 'wagtail': wagtail.__version__, "
                "'weft': weft_django.__file__}))",
            ],
            cwd=tmp_path,
            env=env,
        )
    )
    assert installed["django"] == django.__version__, installed
    assert installed["wagtail"].split(".")[0] == "8", installed
    assert Path(installed["weft"]).is_relative_to(tmp_path / "venv"), installed
    installed_at = time.monotonic()

    # wagtail start mysite; the settings a Wagtail user adds; a linking home page.
    run([str(Path(py).parent / "wagtail"), "start", "mysite"], cwd=tmp_path, env=env)
    site = tmp_path / "mysite"
    manage = [py, str(site / "manage.py")]
    apps = (["django.contrib.postgres"] if postgres else []) + ["weft_django"]
    base = site / "mysite" / "settings" / "base.py"
    base.write_text(base.read_text() + SETTINGS_TAIL.format(apps=apps, database=site_database))
    (site / "home" / "models.py").write_text(HOME_MODELS_PY)
    run([*manage, "makemigrations", "home", "-v", "0"], cwd=site, env=env)
    run([*manage, "migrate", "--noinput", "-v", "0"], cwd=site, env=env)
    migrated_at = time.monotonic()

    # Publish. Wagtail enqueues; nothing runs the tasks yet, so no effect shows.
    published = _line(
        run([*manage, "shell", "-v", "0", "-c", PUBLISH_SNIPPET], cwd=site, env=env), "PUBLISHED="
    )
    page = published["page"]
    assert published["live"] is True and published["title"] == "Weftpublished tidings", published
    enqueued = {**published["on_create"], **published["on_publish"]}
    expected_input = {"args": ["home", "homepage", str(page)], "kwargs": {}}
    for name in (REFERENCE_TASK, SEARCH_TASK):
        on_publish = [v for v in published["on_publish"].values() if v[0] == name]
        assert on_publish, f"publishing enqueued no {name}: {published}"
        assert all(v[1] == "pending" and v[2] == expected_input for v in on_publish), published
    assert {v[0] for v in enqueued.values()} == {REFERENCE_TASK, SEARCH_TASK}, published
    assert published["references"] == 0, published
    assert published["found"] == [], published

    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        worker = subprocess.Popen(
            [*manage, "weft_worker", "--grace", "5"],
            cwd=site,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as a whole
        )
    try:
        waited = time.monotonic()
        statuses: dict[str, str] = {}
        while time.monotonic() - waited < HANG_TIMEOUT_S:
            assert worker.poll() is None, f"weft_worker exited early:\n{log_path.read_text()}"
            out = run([*manage, "shell", "-v", "0", "-c", STATUS_SNIPPET], cwd=site, env=env)
            statuses = _line(out, "RUNS=")
            if set(statuses) == set(enqueued) and set(statuses.values()) == {"completed"}:
                break
            time.sleep(0.5)
        drained_at = time.monotonic()
        assert set(statuses) == set(enqueued), (statuses, enqueued)
        assert set(statuses.values()) == {"completed"}, f"{statuses}\n{log_path.read_text()}"

        # Another process reads every TaskResult and the tasks' effects.
        out = run(
            [*manage, "shell", "-v", "0", "-c", RESULTS_SNIPPET.replace("PAGE_ID", str(page))],
            cwd=site,
            env=env,
        )
        seen = _line(out, "RESULTS=")
        for run_id, result in seen["results"].items():
            assert result["status"] == "SUCCESSFUL", (run_id, result)
            assert result["api"].startswith("django_tasks"), result  # Wagtail's API
            assert result["task"] == enqueued[run_id][0], result
            assert len(result["worker_ids"]) == 1 and result["errors"] == [], result
            if django.VERSION >= (6, 0):
                assert result["core_status"] == "SUCCESSFUL", result
        assert ["featured_page", "wagtailcore.Page", str(published["home"])] in seen[
            "references"
        ], seen
        assert seen["found"] == [page], seen

        # SIGTERM: the worker releases its claims and exits 0.
        os.killpg(worker.pid, signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, log_path.read_text()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.wait(timeout=10)
    print(
        f"wagtail site (Django {installed['django']}, Wagtail {installed['wagtail']}): "
        f"install {installed_at - began:.1f} s, site+migrate {migrated_at - installed_at:.1f} s, "
        f"{len(enqueued)} task runs drained in {drained_at - waited:.1f} s, "
        f"total {time.monotonic() - began:.1f} s"
    )
