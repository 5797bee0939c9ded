"""Events and streams across real processes (issue #18 parts 1 and 2).

A ``weft_worker`` child drives the workflows; the test process waits on
them. What could fail: a ``get_event`` that never sees the set another
process committed (NOTIFY on PostgreSQL); a stream that a takeover makes
skip, repeat or reorder an offset (the first engine is SIGKILLed in the
middle of the stream, a second continues it); an SSE endpoint that does
not stream to a real HTTP client, under WSGI (a ``wsgiref`` server, a
``StreamingHttpResponse`` of a sync generator) and under ASGI (``uvicorn``,
an async generator). Timeouts are hang protection only; nothing asserts a
duration (the latency is measured by ``benchmarks/events.py``).

PostgreSQL only (the ``processes`` marker keeps it off the SQLite leg).
"""

from __future__ import annotations

import base64
import json
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
import requests
from django.db import connection, connections

from tests.engines.harness import HANG_TIMEOUT_S, Worker, wait_for
from tests.engines.published_workflows import IMPORTS
from tests.support import ChildGroup, child_env, python
from weft_django import client
from weft_django.client.published import stream_entries
from weft_django.models import JournalEntry, StreamEntry

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

USER, PASSWORD = "sse-staff", "sse-pw"
AUTH = {"Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AsgiServer(ChildGroup):
    """``uvicorn tests.procs.sse_app:application`` on the test database."""

    reap_timeout_s = HANG_TIMEOUT_S

    def __init__(self, logs: Path) -> None:
        self.port = _free_port()
        env = child_env(DJANGO_SETTINGS_MODULE="tests.procs.sse_settings", WEFT_TEST_TIMINGS="1")
        command = [
            python(),
            "-m",
            "uvicorn",
            "tests.procs.sse_app:application",
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

    def accepting(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _wsgi_server() -> tuple[WSGIServer, threading.Thread]:
    """The project's WSGI app on ``wsgiref`` in a thread of the test process."""
    from project.wsgi import application

    server = make_server("127.0.0.1", _free_port(), application, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="wsgi", daemon=True)
    thread.start()
    return server, thread


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    assert connection.vendor == "postgresql", "process tests run on PostgreSQL"
    first = Worker("pub-w1", tmp_path, imports=IMPORTS)
    try:
        first.wait_booted()
        yield first
    finally:
        first.kill()


def test_an_event_set_by_another_process_is_awaited(worker: Worker) -> None:
    client.start("pub-set-later", {"pause": 0.3, "n": 7}, workflow_id="pub-live-1")
    value = client.get_event("pub-live-1", "answer", timeout=HANG_TIMEOUT_S)
    assert value == {"from": "engine", "n": 7}
    assert client.get_events("pub-live-1") == {"answer": {"from": "engine", "n": 7}}
    client.signal("pub-live-1", "end", None)


def _read_all(workflow_id: str, seen: list[tuple[int, Any]], errors: list[BaseException]) -> None:
    try:
        seen.extend(stream_entries(workflow_id, "progress"))
    except BaseException as exc:  # reported by the test
        errors.append(exc)
    finally:
        connections.close_all()


def test_a_stream_is_read_in_order_across_a_takeover(tmp_path: Path, worker: Worker) -> None:
    steps = 8
    handle = client.start(
        "pub-stream-chain", {"steps": steps, "pause": 0.4}, workflow_id="pub-live-2"
    )
    seen: list[tuple[int, Any]] = []
    errors: list[BaseException] = []
    reader = threading.Thread(target=_read_all, args=("pub-live-2", seen, errors))
    reader.start()
    second: Worker | None = None
    try:
        wait_for(
            "three stream values",
            lambda: StreamEntry.objects.filter(run_id=handle.run_id).count() >= 3,
            worker,
        )
        worker.kill()  # SIGKILL mid-stream (an activity is running)
        assert worker.proc.returncode == -signal.SIGKILL
        second = Worker("pub-w2", tmp_path, imports=IMPORTS)
        assert handle.result(timeout=90) == "done"
        reader.join(timeout=HANG_TIMEOUT_S)
        assert not reader.is_alive() and not errors, errors
    finally:
        if second is not None:
            second.kill()
        reader.join(timeout=HANG_TIMEOUT_S)
    # Each offset once, in order, each value the one written at it.
    assert seen == [(i, {"step": i, "of": steps}) for i in range(steps)]
    rows = list(
        StreamEntry.objects.filter(run_id=handle.run_id)
        .order_by("offset")
        .values_list("offset", "closed")
    )
    assert rows == [*((i, False) for i in range(steps)), (steps, True)]
    writes = JournalEntry.objects.filter(run_id=handle.run_id, kind="stream-write").count()
    assert writes == steps


def _sse_messages(url: str, found: list[dict[str, Any]], errors: list[BaseException]) -> None:
    """Read ``url`` as a browser's EventSource would, until ``event: end``."""
    try:
        headers = {**AUTH, "Accept": "text/event-stream"}
        with requests.get(url, headers=headers, stream=True, timeout=HANG_TIMEOUT_S) as response:
            assert response.status_code == 200, response.text
            assert response.headers["Content-Type"].startswith("text/event-stream")
            message: dict[str, Any] = {}
            for line in response.iter_lines(decode_unicode=True):
                if line == "":
                    if message:
                        found.append(message)
                        if message.get("event") == "end":
                            return
                    message = {}
                elif not line.startswith(":"):
                    field, _, value = line.partition(": ")
                    message[field] = value
                    if field == "data":  # PostgreSQL's jsonb orders keys: compare values
                        message[field] = json.loads(value)
    except BaseException as exc:
        errors.append(exc)


def test_the_sse_endpoint_streams_to_real_http_clients(
    tmp_path: Path, worker: Worker, django_user_model: Any
) -> None:
    django_user_model.objects.create_user(USER, password=PASSWORD, is_staff=True)
    asgi = AsgiServer(tmp_path)
    wsgi, wsgi_thread = _wsgi_server()
    try:
        wait_for("uvicorn to accept connections", asgi.accepting, asgi)
        steps = 3
        client.start("pub-stream-chain", {"steps": steps, "pause": 0.3}, workflow_id="pub-live-3")
        path = "api/weft/workflows/pub-live-3/streams/progress/"
        urls = {
            "asgi": f"http://127.0.0.1:{asgi.port}/{path}",
            "wsgi": f"http://127.0.0.1:{wsgi.server_port}/{path}",
        }
        found: dict[str, list[dict[str, Any]]] = {name: [] for name in urls}
        errors: list[BaseException] = []
        readers = [
            threading.Thread(target=_sse_messages, args=(url, found[name], errors))
            for name, url in urls.items()
        ]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(timeout=60)
        assert not errors, errors
        expected = [{"id": str(i), "data": {"step": i, "of": steps}} for i in range(steps)]
        for name in urls:
            messages = [m for m in found[name] if "retry" not in m]
            assert messages == [*expected, {"event": "end", "data": {}}], (name, found[name])
        # A reconnect with Last-Event-ID resumes after it (the stream is closed now).
        resumed: list[dict[str, Any]] = []
        headers = {**AUTH, "Last-Event-ID": "1"}
        response = requests.get(urls["asgi"], headers=headers, timeout=HANG_TIMEOUT_S)
        for block in response.text.split("\n\n"):
            fields: dict[str, Any] = dict(
                line.split(": ", 1) for line in block.splitlines() if ": " in line
            )
            if "data" in fields:
                fields["data"] = json.loads(fields["data"])
            if fields and "retry" not in fields:
                resumed.append(fields)
        assert resumed == [expected[2], {"event": "end", "data": {}}]
    finally:
        wsgi.shutdown()
        wsgi.server_close()
        wsgi_thread.join(timeout=HANG_TIMEOUT_S)
        asgi.kill()
