"""The chaos proxy black-holes without resetting (``devtools/chaos/proxy.py``).

Against a local echo server, no database: while a port is blocked, bytes sent
either way are held (the client reads nothing, and no EOF or RST), new
connections wait, and another port is untouched; once healed, everything
queued is delivered; an upstream close reaches the client as EOF.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from devtools.chaos.proxy import ProxyHub

QUIET_S = 0.3  # how long "nothing arrives" is watched; never a performance bound


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                if data == b"bye":
                    return
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = server.accept()
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield ("127.0.0.1", server.getsockname()[1])
    stop.set()
    server.close()


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.settimeout(QUIET_S)
    return sock


def test_blocked_port_holds_bytes_and_connections_then_delivers_on_heal(echo):
    hub = ProxyHub(echo)
    try:
        cut, other = hub.add("cut"), hub.add("other")
        a, b = connect(cut), connect(other)
        a.sendall(b"one")
        assert a.recv(16) == b"one"
        hub.block("cut")
        a.sendall(b"two")
        with pytest.raises(TimeoutError):
            a.recv(16)  # nothing, and no EOF (b"") or reset either
        late = connect(cut)  # the handshake completes in the kernel's backlog ...
        late.sendall(b"late")
        with pytest.raises(TimeoutError):
            late.recv(16)  # ... and then nothing flows
        b.sendall(b"free")
        assert b.recv(16) == b"free"  # the other port is untouched
        hub.heal("cut")
        a.settimeout(5)
        late.settimeout(5)
        assert a.recv(16) == b"two"
        assert late.recv(16) == b"late"
        a.sendall(b"bye")  # the server closes: the client sees EOF
        assert a.recv(16) == b""
    finally:
        hub.close()
