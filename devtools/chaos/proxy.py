"""A small TCP proxy the chaos harness controls: one port per engine, all to
PostgreSQL, each of which can be black-holed and healed.

Why a proxy: a network partition as separate hosts see it — bytes stop
flowing both ways, sockets stay open, nobody sends a FIN or an RST — cannot be
made with ``pg_terminate_backend`` (the client sees an error at once) nor,
without root, with iptables. Each engine reaches the database through its own
port here, so one engine can be cut off while the others go on.

While a port is black-holed nothing is read or written on any of its
connections and new connections wait unaccepted in the listen backlog (their
TCP handshake completes in the kernel, then nothing flows, as across a
partition). ``heal()`` resumes everything that was queued on either side.

One selector thread serves every port (``select`` over the live sockets,
rebuilt each pass: a few dozen sockets at most); a socketpair wakes it when
the harness blocks or heals a port.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from dataclasses import dataclass, field

#: Stop reading a side while this much is waiting to be written to the other.
HIGH_WATER = 1 << 20
CHUNK = 1 << 16


@dataclass
class _Pair:
    """A client connection and its upstream connection, with what each side
    still has to receive."""

    port: str
    client: socket.socket
    upstream: socket.socket
    to_client: bytearray = field(default_factory=bytearray)
    to_upstream: bytearray = field(default_factory=bytearray)
    closed: bool = False

    def close(self) -> None:
        self.closed = True
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.close()


class ProxyHub:
    """Ports named by the harness, each forwarding to ``target``; blockable."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._listeners: dict[str, socket.socket] = {}
        self._blocked: set[str] = set()
        self._pairs: list[_Pair] = []
        self._stop = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._thread = threading.Thread(target=self._loop, name="chaos-proxy", daemon=True)
        self._thread.start()

    # -- control (any thread) -----------------------------------------------------
    def add(self, name: str) -> int:
        """Open a port for ``name`` on 127.0.0.1; returns its number."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        listener.setblocking(False)
        with self._lock:
            self._listeners[name] = listener
        self._poke()
        return int(listener.getsockname()[1])

    def block(self, name: str) -> None:
        """Black-hole ``name``: stop forwarding both ways, keep every socket open."""
        with self._lock:
            self._blocked.add(name)
        self._poke()

    def heal(self, name: str) -> None:
        with self._lock:
            self._blocked.discard(name)
        self._poke()

    def blocked(self, name: str) -> bool:
        with self._lock:
            return name in self._blocked

    def connections(self, name: str) -> int:
        with self._lock:
            return sum(1 for pair in self._pairs if pair.port == name and not pair.closed)

    def close(self) -> None:
        self._stop = True
        self._poke()
        self._thread.join(timeout=5)
        with self._lock:
            for pair in self._pairs:
                pair.close()
            for listener in self._listeners.values():
                listener.close()
            self._pairs.clear()
            self._listeners.clear()

    def _poke(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- the loop (its own thread) --------------------------------------------------
    def _loop(self) -> None:
        while not self._stop:
            with self._lock:
                blocked = set(self._blocked)
                listeners = {
                    sock: name for name, sock in self._listeners.items() if name not in blocked
                }
                pairs = [p for p in self._pairs if not p.closed and p.port not in blocked]
            readers: list[socket.socket] = [self._wake_r, *listeners]
            writers: list[socket.socket] = []
            owner: dict[socket.socket, _Pair] = {}
            for pair in pairs:
                owner[pair.client] = owner[pair.upstream] = pair
                if len(pair.to_upstream) < HIGH_WATER:
                    readers.append(pair.client)
                if len(pair.to_client) < HIGH_WATER:
                    readers.append(pair.upstream)
                if pair.to_client:
                    writers.append(pair.client)
                if pair.to_upstream:
                    writers.append(pair.upstream)
            try:
                readable, writable, _ = select.select(readers, writers, [], 0.5)
            except (OSError, ValueError):
                self._reap()  # a socket closed under us: drop it and go on
                continue
            for sock in readable:
                if sock is self._wake_r:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                elif sock in listeners:
                    self._accept(sock, listeners[sock])
                else:
                    self._read(owner[sock], sock)
            for sock in writable:
                pair = owner[sock]
                if not pair.closed:
                    self._write(pair, sock)
            self._reap()

    def _accept(self, listener: socket.socket, name: str) -> None:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        for sock in (client, upstream):
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._pairs.append(_Pair(name, client, upstream))

    def _read(self, pair: _Pair, sock: socket.socket) -> None:
        try:
            data = sock.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # EOF or reset: pass on what is queued for the other side, then close
            other = pair.upstream if sock is pair.client else pair.client
            rest = pair.to_upstream if sock is pair.client else pair.to_client
            with contextlib.suppress(OSError):
                other.setblocking(True)
                other.settimeout(1)
                other.sendall(bytes(rest))
            pair.close()
            return
        (pair.to_upstream if sock is pair.client else pair.to_client).extend(data)

    def _write(self, pair: _Pair, sock: socket.socket) -> None:
        buffer = pair.to_client if sock is pair.client else pair.to_upstream
        try:
            sent = sock.send(buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            pair.close()
            return
        del buffer[:sent]

    def _reap(self) -> None:
        with self._lock:
            for pair in self._pairs:
                if not pair.closed and (pair.client.fileno() < 0 or pair.upstream.fileno() < 0):
                    pair.close()
            self._pairs = [p for p in self._pairs if not p.closed]
