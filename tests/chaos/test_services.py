"""The chaos soak's private services (``devtools.chaos.services``): a restart of the
private PostgreSQL drops every session at once and the server comes back on
the same port; a stopped private Redis refuses connections until started again.
Neither touches the shared servers (their own free ports). ``processes`` tier:
real server processes (PostgreSQL's binaries and redis-server, as CI has them).
"""

from __future__ import annotations

import psycopg
import pytest
import redis

from devtools.chaos.services import PrivatePostgres, PrivateRedis, port_open

pytestmark = [pytest.mark.processes]


def test_private_postgres_restart_drops_sessions_and_comes_back(tmp_path):
    server = PrivatePostgres(log_dir=tmp_path).setup()
    try:
        assert server.port != 5432
        dsn = dict(host="127.0.0.1", port=server.port, user="postgres", dbname="postgres")
        with psycopg.connect(**dsn, autocommit=True) as before:
            assert before.execute("SHOW fsync").fetchone() == ("off",)
            server.restart(0.5)
            with pytest.raises(psycopg.OperationalError):
                before.execute("SELECT 1")
        with psycopg.connect(**dsn, autocommit=True) as after:
            assert after.execute("SELECT 1").fetchone() == (1,)
    finally:
        server.close()
    assert not port_open(server.port)
    assert (tmp_path / "postgres.log").exists()


def test_private_redis_stops_and_starts_on_its_port(tmp_path):
    server = PrivateRedis(log_dir=tmp_path).start()
    try:
        assert server.port != 6379
        client = redis.Redis.from_url(server.url(0))
        client.set("k", "v")
        server.stop()
        assert not port_open(server.port)
        with pytest.raises(redis.ConnectionError):
            client.get("k")
        server.start()
        assert client.get("k") is None  # no persistence: it comes back empty
        assert client.ping()
    finally:
        server.close()


def test_private_postgres_restart_keeps_every_acknowledged_commit(tmp_path):
    """The fault is a server crash, not data loss: a commit acknowledged just
    before the immediate shutdown is there after the restart."""
    server = PrivatePostgres(log_dir=tmp_path).setup()
    try:
        dsn = dict(host="127.0.0.1", port=server.port, user="postgres", dbname="postgres")
        with psycopg.connect(**dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE acked (n int)")
            for n in range(200):
                conn.execute("INSERT INTO acked VALUES (%s)", [n])
            server.restart(0.2)
        with psycopg.connect(**dsn, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM acked").fetchone() == (200,)
    finally:
        server.close()
