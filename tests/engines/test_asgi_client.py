"""The async client from an ASGI app served by a real server (issue #18 part 6).

A ``uvicorn`` child (one worker: one event loop) serves async Django views
(``tests/procs/asgi_urls.py``) that ``await client.astart(...)`` and
``await handle.aresult()``; a real ``weft_worker`` child runs the workflows;
the test talks HTTP to the server with ``urllib``. What could fail: an async
view that cannot call the client at all, an ``aresult`` that never sees the
finish another process committed, and one that blocks the loop -- then the
``ping/`` and ``signal/`` requests sent while a ``start-and-wait/`` request
is waiting could not be answered, and that request would never finish (its
workflow waits for exactly that signal).

PostgreSQL only (the ``processes`` marker keeps it off the SQLite leg);
timeouts are hang protection only.
"""

from __future__ import annotations

import json
import socket
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.engines.asgi_workflows import IMPORTS
from tests.engines.harness import HANG_TIMEOUT_S, Worker, wait_for
from tests.support import ChildGroup, child_env, python
from weft_django.models import WorkflowRun

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server(ChildGroup):
    """``python -m uvicorn tests.procs.asgi_app:application`` on the test database."""

    reap_timeout_s = HANG_TIMEOUT_S

    def __init__(self, logs: Path) -> None:
        self.port = _free_port()
        env = child_env(DJANGO_SETTINGS_MODULE="tests.procs.asgi_settings", WEFT_TEST_TIMINGS="1")
        command = [
            python(),
            "-m",
            "uvicorn",
            "tests.procs.asgi_app:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            "1",
            "--lifespan",
            "off",
        ]
        super().__init__(command, logs / "uvicorn.log", env)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    def accepting(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False


def _request(url: str, body: Any = None, timeout: float = HANG_TIMEOUT_S) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        headers={"Content-Type": "application/json"},
        method="GET" if data is None else "POST",
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, json.loads(response.read())


@pytest.fixture
def children(tmp_path: Path) -> Any:
    assert connection.vendor == "postgresql", "process tests run on PostgreSQL"
    worker = Worker("asgi-engine", tmp_path, imports=IMPORTS)
    server = Server(tmp_path)
    try:
        worker.wait_booted()
        wait_for("uvicorn to accept connections", server.accepting, server)
        yield worker, server
    finally:
        server.kill()
        worker.kill()


def test_an_async_view_starts_a_run_and_awaits_its_result(children: Any) -> None:
    _worker, server = children
    status, body = _request(
        server.url("start-and-wait/asgi-1/"), {"name": "asgi-double", "input": {"n": 21}}
    )
    assert status == 200, body
    assert body["result"] == {"doubled": 42}
    run = WorkflowRun.objects.get(workflow_id="asgi-1")
    assert (str(run.pk), run.status) == (body["run_id"], "completed")


def test_the_loop_serves_other_requests_while_aresult_waits(children: Any) -> None:
    worker, server = children
    answer: dict[str, Any] = {}

    def waiting_request() -> None:
        try:
            answer["response"] = _request(
                server.url("start-and-wait/asgi-2/"), {"name": "asgi-wait-go", "input": "x"}
            )
        except BaseException as exc:  # reported by the assertions below
            answer["error"] = exc

    thread = threading.Thread(target=waiting_request)
    thread.start()
    try:
        wait_for(
            "asgi-2 to park on its signal",
            lambda: WorkflowRun.objects.filter(workflow_id="asgi-2", status="parked").exists(),
            worker,
            server,
        )
        # The same single event loop answers while start-and-wait awaits aresult.
        assert _request(server.url("ping/")) == (200, {"pong": True})
        assert thread.is_alive() and not answer, answer
        status, sent = _request(server.url("signal/asgi-2/"), {"v": 1})
        assert status == 202, sent
    finally:
        thread.join(timeout=HANG_TIMEOUT_S)
    assert "error" not in answer, answer
    status, body = answer["response"]
    assert status == 200, body
    assert body["result"] == {"input": "x", "go": {"v": 1}}
