"""A newcomer's path, for real: wheel → fresh venv → startproject → a workflow runs.

What a new user does, step by step, with nothing from this repository on the
path: build the wheel (once per test session), install it with pip into a
brand-new virtualenv, ``django-admin startproject mysite`` (run as
``python -m django``, the same program), add ``weft_django`` and an app with
a ``workflows.py``, set the SQLite ``OPTIONS`` README asks for, ``migrate``,
run ``manage.py weft_worker`` and start the workflow from
``manage.py shell -c``; it must complete.

It also proves the package needs only Django: the fresh venv sees the base
interpreter's site-packages (``--system-site-packages``) plus a folder that
holds *only* Django and its own dependencies (symlinked from the running
environment, no network). ``test_a_missing_extra_names_its_install_command``
then imports each integration there and expects the ``pip install
"weft-django[<extra>]"`` that adds it (skipped when the base interpreter
happens to carry the extra's package). README's "A first workflow" blocks
run verbatim (only the one-day sleep is shortened), so the front door's
example is known to work.

The test database is a SQLite file in the temporary folder, whatever the
suite's ``DATABASE_URL``; the module carries the ``processes`` marker (it runs
once, on the PostgreSQL leg). Every child runs with ``cwd`` inside the
temporary folder and an environment without ``PYTHONPATH``,
``DJANGO_SETTINGS_MODULE`` or ``DATABASE_URL``, and the test asserts that
``import weft_django`` resolves to the installed wheel. The worker runs in its
own process group, killed in a ``finally``. Waits are polls bounded by
``HANG_TIMEOUT_S`` (hang protection, not a performance assertion).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fresh.support import COMMAND_TIMEOUT_S
from tests.fresh.support import clean_env as _clean_env
from tests.fresh.support import run as _run
from tests.support import REPO_ROOT

pytestmark = [pytest.mark.processes]

HANG_TIMEOUT_S = 60.0  # hang protection only

#: What the package itself requires: Django and Django's own dependencies.
DJANGO_ONLY = ("django", "asgiref", "sqlparse")
DJANGO_DISTRIBUTIONS = ("Django", "asgiref", "sqlparse")

WORKFLOWS_PY = """\
from datetime import timedelta

from weft_django import activity, workflow


@activity(retries=2, backoff=timedelta(seconds=1))
def add(a: int, b: int) -> int:
    return a + b


@activity()
def greet(name: str) -> str:
    return f"hello, {name}"


@workflow(name="hello")
def hello(ctx, data):
    total = yield ctx.run(add, data["a"], data["b"])
    text = yield ctx.run(greet, data["name"])
    return {"total": total, "text": text}
"""

# Appended to the generated settings.py. The DATABASES block is taken verbatim
# from README's "Installing into your project" (see _readme_block).
SETTINGS_TAIL = """

# --- weft-django, as README "Installing into your project" says -------------
INSTALLED_APPS += ["weft_django", "shop"]
WEFT = {}
"""

# README's "A first workflow": its workflows.py block is appended to the app's
# workflows.py (with the one-day sleep shortened) and its client block runs in
# ``manage.py shell -c``, so the front door's example is known to work.
README_SLEEP = "ctx.sleep(timedelta(days=1))"
README_SLEEP_SHORT = "ctx.sleep(timedelta(seconds=1))"


def _readme_block(marker: str) -> str:
    """The first ```python block of README.md that contains ``marker``."""
    text = (REPO_ROOT / "README.md").read_text()
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        if marker in block:
            return str(block)
    raise AssertionError(f"README.md has no python block containing {marker!r}")


STATUS_SNIPPET = (
    "import json; from weft_django import client; "
    "h = client.get_handle('fresh-1'); "
    "s = h.status(); "
    "print('STATUS=' + json.dumps({'status': s, "
    "'result': h.result(timeout=0) if s == 'completed' else None, "
    "'error': h.error()}))"
)


def _django_only_dir(target: Path) -> Path:
    """A folder with symlinks to Django and its dependencies (and nothing else)."""
    target.mkdir()
    for module in DJANGO_ONLY:
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.submodule_search_locations, module
        package_dir = Path(next(iter(spec.submodule_search_locations)))
        (target / module).symlink_to(package_dir, target_is_directory=True)
    for dist_name in DJANGO_DISTRIBUTIONS:
        dist = importlib.metadata.distribution(dist_name)
        dist_info = (
            Path(str(dist.locate_file("")))
            / next(p for p in (dist.files or []) if p.parts[0].endswith(".dist-info")).parts[0]
        )
        (target / dist_info.name).symlink_to(dist_info, target_is_directory=True)
    return target


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory, weft_wheel: Path) -> Iterator[Path]:
    """A new virtualenv with the wheel installed; its python executable."""
    tmp_path = tmp_path_factory.mktemp("fresh-venv")
    venv = tmp_path / "venv"
    env = _clean_env()
    _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], cwd=tmp_path, env=env)
    py = venv / "bin" / "python"
    site_packages = Path(
        _run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            cwd=tmp_path,
            env=env,
        ).strip()
    )
    # ``sys.executable`` may itself be a venv (the repository's .venv), whose
    # packages a venv made from it does not see: expose Django, and only Django.
    deps = _django_only_dir(tmp_path / "django-only")
    (site_packages / "_django_only.pth").write_text(f"{deps}\n")
    _run(
        [str(py), "-m", "pip", "install", "--no-deps", "--no-build-isolation", str(weft_wheel)],
        cwd=tmp_path,
        env=env,
    )
    yield py


def _import_failure(py: str, module: str, cwd: Path, env: dict[str, str]) -> str:
    """Import ``module`` in the fresh interpreter, which must fail; its stderr."""
    proc = subprocess.run(
        [py, "-c", f"import {module}"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    assert proc.returncode != 0, f"import {module} succeeded without its extra"
    return proc.stderr


def test_a_new_user_runs_a_workflow(tmp_path: Path, fresh_venv: Path, weft_wheel: Path) -> None:
    py = str(fresh_venv)
    env = _clean_env()

    # The package comes from the wheel, not from this checkout.
    where = json.loads(
        _run(
            [
                py,
                "-c",
                "import json, weft_django; print(json.dumps({"
                "'file': weft_django.__file__, 'version': weft_django.__version__}))",
            ],
            cwd=tmp_path,
            env=env,
        )
    )
    installed = Path(where["file"]).resolve().parent
    assert installed.is_relative_to(fresh_venv.parent.parent.resolve()), where
    assert not installed.is_relative_to(REPO_ROOT.resolve()), where
    assert weft_wheel.name.startswith(f"weft_django-{where['version']}-"), (weft_wheel, where)
    assert (installed / "py.typed").is_file()
    assert (installed / "migrations" / "0001_initial.py").is_file()
    assert list((installed / "templates").rglob("*.html"))

    # django-admin startproject mysite; manage.py startapp shop.
    _run([py, "-m", "django", "startproject", "mysite"], cwd=tmp_path, env=env)
    site = tmp_path / "mysite"
    manage = [py, str(site / "manage.py")]
    _run([*manage, "startapp", "shop"], cwd=site, env=env)
    readme_workflows = _readme_block("# yourapp/workflows.py")
    assert readme_workflows.count(README_SLEEP) == 1, readme_workflows
    (site / "shop" / "workflows.py").write_text(
        WORKFLOWS_PY + "\n\n" + readme_workflows.replace(README_SLEEP, README_SLEEP_SHORT)
    )
    settings_py = site / "mysite" / "settings.py"
    settings_py.write_text(
        settings_py.read_text() + SETTINGS_TAIL + _readme_block('"transaction_mode"')
    )

    # System checks pass with README's settings (weft.E010 would fire otherwise).
    _run([*manage, "check"], cwd=site, env=env)
    _run([*manage, "migrate", "--noinput", "-v", "0"], cwd=site, env=env)
    assert (site / "db.sqlite3").is_file()

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
        started = _run(
            [
                *manage,
                "shell",
                "-c",
                "from weft_django import client; "
                "h = client.start('hello', {'a': 2, 'b': 3, 'name': 'newcomer'}, "
                "workflow_id='fresh-1'); print('STARTED=' + h.workflow_id)",
            ],
            cwd=site,
            env=env,
        )
        assert "STARTED=fresh-1" in started, started

        began = time.monotonic()
        seen: dict[str, object] = {}
        while time.monotonic() - began < HANG_TIMEOUT_S:
            assert worker.poll() is None, f"weft_worker exited early:\n{log_path.read_text()}"
            out = _run([*manage, "shell", "-c", STATUS_SNIPPET], cwd=site, env=env)
            line = next(x for x in out.splitlines() if x.startswith("STATUS="))
            seen = json.loads(line.removeprefix("STATUS="))
            if seen["status"] in ("completed", "failed", "cancelled", "timed_out"):
                break
            time.sleep(0.5)
        print(f"fresh project: workflow terminal after {time.monotonic() - began:.1f} s")
        assert seen.get("status") == "completed", f"{seen}\n--- worker\n{log_path.read_text()}"
        assert seen["result"] == {"total": 5, "text": "hello, newcomer"}, seen

        # README's client block, verbatim (its last line waits for the result),
        # against the same worker; then print the result for the assertions.
        readme_client = _readme_block("client.start(")
        assert "h.result(timeout=30)" in readme_client, readme_client
        code = readme_client + "\nimport json; print('RESULT=' + json.dumps(h.result(timeout=30)))"
        out = _run([*manage, "shell", "-c", code], cwd=site, env=env)
        line = next(x for x in out.splitlines() if x.startswith("RESULT="))
        result = json.loads(line.removeprefix("RESULT="))
        assert result["approved"] is True, result
        assert result["receipt"] == {"order": "o-1", "charged": 500}, result
        assert result["packed"] == "reserved:o-1", result

        # SIGTERM: the worker releases its claims and exits 0 (README "Engines").
        os.killpg(worker.pid, signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, log_path.read_text()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.wait(timeout=10)


@pytest.mark.parametrize(
    ("extra", "module", "requirement"),
    [
        ("api", "weft_django.api.urls", "rest_framework"),
        ("metrics", "weft_django.contrib.prometheus", "prometheus_client"),
        ("celery", "weft_django.celery", "celery"),
    ],
)
def test_a_missing_extra_names_its_install_command(
    tmp_path: Path, fresh_venv: Path, extra: str, module: str, requirement: str
) -> None:
    """Only Django is required; an integration without its extra says what to install."""
    py = str(fresh_venv)
    env = _clean_env()
    probe = _run(
        [
            py,
            "-c",
            # (no find_spec on the module itself: that imports its package's guard)
            "import importlib.util as u, pathlib, sys; "
            "spec = u.find_spec('weft_django'); "
            "root = pathlib.Path(next(iter(spec.submodule_search_locations))); "
            "rel = root.joinpath(*sys.argv[2].split('.')[1:]); "
            "print(u.find_spec(sys.argv[1]) is not None, "
            "rel.with_suffix('.py').is_file() or (rel / '__init__.py').is_file())",
            requirement,
            module,
        ],
        cwd=tmp_path,
        env=env,
    ).split()
    if probe[0] == "True":
        pytest.skip(f"the base interpreter provides {requirement}")
    if probe[1] == "False":
        pytest.skip(f"the wheel has no {module}")
    err = _import_failure(py, module, tmp_path, env)
    assert f'pip install "weft-django[{extra}]"' in err, err


KIT_SNIPPET = """
import sys
sys.modules["pytest"] = None  # a unittest project: any "import pytest" fails
import django
from django.conf import settings
settings.configure(
    INSTALLED_APPS=["django.contrib.contenttypes", "weft_django"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
)
django.setup()
from weft_django.testing import FakeClock, WeftTestMixin
print(WeftTestMixin.__module__, FakeClock()())
"""


def test_the_test_kit_imports_in_a_project_without_pytest(tmp_path: Path, fresh_venv: Path) -> None:
    """A unittest project (no pytest) imports ``WeftTestMixin`` from the installed wheel."""
    out = _run([str(fresh_venv), "-c", KIT_SNIPPET], cwd=tmp_path, env=_clean_env()).split()
    assert out == ["weft_django.testing.environment", "1700000000000"]
