"""A broker outage is one warning, not one traceback per message.

Invariant protected: every failed send of a weft task is harmless (polling
re-sends it) and still visible: the first failure of a streak is logged with
its traceback, the rest are counted, and the first send that works again
reports how many were not sent (the chaos soak's broker outages printed ~50
tracebacks each).
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from weft_django.transports.celery import messages


class _Broker:
    def __init__(self) -> None:
        self.down = True
        self.sent: list[str] = []

    def send_task(self, name: str, **kwargs: Any) -> None:
        if self.down:
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        self.sent.append(name)


def test_one_warning_per_outage_and_a_count_when_it_ends(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broker = _Broker()
    monkeypatch.setattr(messages.installation, "current", SimpleNamespace(app=broker))
    monkeypatch.setattr(messages, "_outage", messages._SendOutage())
    caplog.set_level(logging.DEBUG, logger="weft_django.transports.celery")

    def send() -> bool:
        return messages.send("weft.drive", ["run"], {}, "q", now_ms=0, expires_ms=60_000)

    assert [send() for _ in range(5)] == [False] * 5
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].exc_info is not None
    assert "further failures are counted" in warnings[0].getMessage()
    caplog.clear()
    broker.down = False
    assert send() and send()
    recovered = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert recovered == ["sending weft tasks works again; 5 message(s) were not sent"]
    assert broker.sent == ["weft.drive", "weft.drive"]
