"""Private services for the chaos soak: its own PostgreSQL cluster, Redis
server and RabbitMQ node, each on a free port, each the soak's to break.

Why private: the harsher faults stop the services themselves (a PostgreSQL
restart drops every session of the server; a broker outage stops the broker).
Done to the shared PostgreSQL on 5432 or the shared Redis/RabbitMQ, they would
fail every other test running next to the soak (CI runs the suite in
parallel). A private service harms no one, and starts in a second or two.

- ``PrivatePostgres``: ``initdb`` into a temporary directory and ``pg_ctl`` on a
  free port, with ``fsync=off`` (a server crash keeps every commit, a machine
  crash would not: a soak's data is thrown away) but ``synchronous_commit`` on
  (an acknowledged commit must survive ``restart``), and enough connections
  for every engine. ``initdb`` and ``postgres`` refuse
  to run as root, so as root both run as the ``postgres`` user (``runuser``).
  ``restart(down_s)`` is the fault: an immediate shutdown (every backend killed
  at once, as a crash would), the port closed for ``down_s``, then a start
  with crash recovery.
- ``PrivateRedis``: ``redis-server`` with no persistence (``--save ""``);
  ``stop()``/``start()`` on the same port (what it held is lost, as a Redis
  without persistence loses it).
- ``PrivateRabbit``: a second RabbitMQ node (own node name, ports and Mnesia
  directory); ``stop()``/``start()`` are ``rabbitmqctl stop_app``/``start_app``:
  every connection closed and the port refused meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from devtools.procs import wait_for

#: Where the Debian packages (and this image's /usr/local/bin links) put them.
PG_BIN_DIRS = ("/usr/local/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin")
#: Hang protection for a service to come up, never a performance bound.
START_TIMEOUT_S = 60.0


def free_port() -> int:
    """A TCP port nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def _pg_binary(name: str) -> str:
    for directory in PG_BIN_DIRS:
        path = Path(directory) / name
        if path.exists():
            return str(path)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"PostgreSQL's {name!r} is not in {PG_BIN_DIRS} nor on PATH")
    return found


def _as_postgres_user(command: list[str]) -> list[str]:
    """Root may not run initdb/postgres: run them as ``postgres`` then."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


class PrivatePostgres:
    """A throw-away PostgreSQL cluster; ``url(name)`` for Django, ``restart`` to break it."""

    def __init__(self, *, log_dir: Path, max_connections: int = 400) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="weft-chaos-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.user = "postgres"
        # Inside the cluster's own directory (the postgres user may not reach log_dir);
        # copied to ``log_dir`` on close.
        self.log_path = self.root / "postgres.log"
        self.log_dir = log_dir
        self.max_connections = max_connections
        if os.geteuid() == 0:
            shutil.chown(self.root, user="postgres")

    def _run(self, *args: str) -> None:
        result = subprocess.run(
            _as_postgres_user(list(args)), capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({result.returncode}): "
                f"{result.stderr.strip() or result.stdout.strip()}"
            )

    def setup(self) -> PrivatePostgres:
        """initdb (trust authentication, no fsync) and start."""
        self._run(
            _pg_binary("initdb"),
            "-D",
            str(self.data),
            "-U",
            self.user,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        self.start()
        return self

    def start(self) -> None:
        options = " ".join(
            [
                f"-p {self.port}",
                "-c listen_addresses=127.0.0.1",
                f"-c unix_socket_directories={self.root}",
                f"-c max_connections={self.max_connections}",
                "-c shared_buffers=32MB",
                # Safe against a server crash (the kernel keeps what was written);
                # only a machine crash would lose data, and a soak's data is thrown away.
                "-c fsync=off",
                "-c full_page_writes=off",
                # NOT synchronous_commit=off: an immediate shutdown (pg_restart) drops
                # WAL still in the server's buffers, so acknowledged commits would
                # vanish (seen: a signal the harness had sent, lost with its row).
                "-c log_min_messages=warning",
            ]
        )
        self._run(
            _pg_binary("pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.log_path),
            "-w",
            "-t",
            str(int(START_TIMEOUT_S)),
            "start",
        )

    def stop(self, mode: str = "immediate") -> None:
        self._run(_pg_binary("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, down_s: float) -> None:
        """The fault: every session dropped at once, the server gone ``down_s``, back."""
        self.stop("immediate")
        time.sleep(down_s)  # the outage itself: its length is the point
        self.start()

    def url(self, database: str) -> str:
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{database}"

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate")
        with contextlib.suppress(OSError):
            self.log_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.log_path, self.log_dir / "postgres.log")
        shutil.rmtree(self.root, ignore_errors=True)


class PrivateRedis:
    """A throw-away ``redis-server`` without persistence."""

    def __init__(self, *, log_dir: Path) -> None:
        self.port = free_port()
        self.log_path = log_dir / "redis.log"
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> PrivateRedis:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                shutil.which("redis-server") or "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        process = self.process
        wait_for(
            f"redis-server on port {self.port}",
            lambda: port_open(self.port) or process.poll() is not None,
            timeout=START_TIMEOUT_S,
            interval=0.05,
        )
        if process.poll() is not None:
            raise RuntimeError(f"redis-server exited {process.returncode}: see {self.log_path}")
        return self

    def stop(self) -> None:
        """Gone at once (SIGKILL): no goodbye to the clients, nothing kept."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None

    def close(self) -> None:
        self.stop()


class PrivateRabbit:
    """A second RabbitMQ node of this host's installation, on free ports."""

    def __init__(self, *, log_dir: Path) -> None:
        self.port = free_port()
        self.dist_port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="weft-chaos-rabbit-"))
        self.node = f"weftchaos{self.port}@localhost"
        self.log_dir = log_dir
        self.env = dict(
            os.environ,
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_DIST_PORT=str(self.dist_port),
            RABBITMQ_MNESIA_BASE=str(self.root / "mnesia"),
            RABBITMQ_LOG_BASE=str(self.root / "log"),
            RABBITMQ_PID_FILE=str(self.root / "node.pid"),
            # The shared node's plugins (management's port) must not be loaded twice.
            RABBITMQ_ENABLED_PLUGINS_FILE=str(self.root / "enabled_plugins"),
            # The host's rabbitmq.conf names the shared node's port: this node has its own.
            RABBITMQ_CONFIG_FILE=str(self.root / "rabbitmq.conf"),
        )
        (self.root / "enabled_plugins").write_text("[].\n")
        (self.root / "rabbitmq.conf").write_text(f"listeners.tcp.local = 127.0.0.1:{self.port}\n")
        if os.geteuid() == 0:
            # Debian's wrapper runs the node (and rabbitmqctl) as ``rabbitmq`` (su keeps
            # the environment above): the node's directories must be that user's.
            for path in (self.root, *self.root.iterdir()):
                shutil.chown(path, user="rabbitmq")

    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    def _ctl(self, *args: str, timeout: float = 120.0) -> None:
        result = subprocess.run(
            ["rabbitmqctl", "-n", self.node, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"rabbitmqctl {' '.join(args)} failed ({result.returncode}): "
                f"{result.stderr.strip() or result.stdout.strip()}"
            )

    def setup(self) -> PrivateRabbit:
        rabbitmq = shutil.which("rabbitmq-server")
        if rabbitmq is None:
            raise RuntimeError("--broker amqp needs rabbitmq-server (Debian's rabbitmq-server)")
        subprocess.run(
            [rabbitmq, "-detached"], env=self.env, check=True, capture_output=True, timeout=60
        )
        self._wait_up()
        return self

    def _wait_up(self) -> None:
        wait_for(
            f"RabbitMQ node {self.node} on port {self.port}",
            lambda: port_open(self.port),
            timeout=START_TIMEOUT_S * 2,
            interval=0.2,
        )

    def stop(self) -> None:
        """Every AMQP connection closed, the port refused until ``start``."""
        self._ctl("stop_app")

    def start(self) -> None:
        self._ctl("start_app")
        self._wait_up()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ctl("stop", timeout=60)
        log = self.root / "log"
        if log.exists():
            with contextlib.suppress(OSError):
                shutil.copytree(log, self.log_dir / "rabbitmq", dirs_exist_ok=True)
        shutil.rmtree(self.root, ignore_errors=True)


__all__ = ["PrivatePostgres", "PrivateRabbit", "PrivateRedis", "free_port", "port_open"]
