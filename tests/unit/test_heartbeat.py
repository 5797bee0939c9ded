"""``ActivityInfo.heartbeat()`` against a fake sink: liveness, throttle, refusals.

No database: the sink is a list. Checked: every call records liveness; the
first beat of an attempt is written at once and later ones at most once per
``HEARTBEAT_WRITE_INTERVAL_MS``, a due write carrying the latest details;
invalid details are logged, not raised, and the previous details are kept;
a cancelled attempt, or a sink that refuses, raises ``ActivityCancelled``;
an ``ActivityInfo`` built by hand cannot heartbeat.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support import ManualClock
from weft_django import ActivityCancelled
from weft_django.engine.activities.info import (
    HEARTBEAT_WRITE_INTERVAL_MS,
    ActivityInfo,
    AttemptControl,
)


@dataclass
class FakeSink:
    writes: list[Any]
    refuse_with: str | None = None

    def __call__(self, details: Any) -> None:
        if self.refuse_with is not None:
            raise ActivityCancelled("wf-beat", self.refuse_with)
        self.writes.append(details)


def attempt(clock: ManualClock, sink: FakeSink | None = None) -> ActivityInfo:
    control = AttemptControl(clock, heartbeat_timeout_ms=5_000, sink=sink)
    return ActivityInfo("wf-beat", "run-1", 3, 1, 7, "wf-beat:3", None, control=control)


def control_of(info: ActivityInfo) -> AttemptControl:
    assert info.control is not None
    return info.control


def test_first_beat_is_written_at_once_then_at_most_once_a_second(clock: ManualClock) -> None:
    sink = FakeSink([])
    info = attempt(clock, sink)
    info.heartbeat({"done": 1})
    assert sink.writes == [{"done": 1}]
    clock.advance(400)
    info.heartbeat({"done": 2})
    clock.advance(400)
    info.heartbeat({"done": 3})
    assert sink.writes == [{"done": 1}], "throttled: under a second since the first write"
    assert control_of(info).details == {"done": 3}
    assert control_of(info).last_beat_ms == clock.now, "liveness counts even when throttled"
    clock.advance(HEARTBEAT_WRITE_INTERVAL_MS - 800)  # one second after the first write
    info.heartbeat({"done": 4})
    assert sink.writes == [{"done": 1}, {"done": 4}]
    clock.advance(HEARTBEAT_WRITE_INTERVAL_MS - 1)
    info.heartbeat()
    assert sink.writes == [{"done": 1}, {"done": 4}]
    assert not control_of(info).heartbeat_overdue(clock.now)


def test_details_are_normalised_like_every_payload(clock: ManualClock) -> None:
    sink = FakeSink([])
    info = attempt(clock, sink)
    info.heartbeat({"pair": (1, 2), "rows": 10})
    assert sink.writes == [{"pair": [1, 2], "rows": 10}]  # the JSON round trip


def test_concurrent_beats_write_once(clock: ManualClock) -> None:
    sink = FakeSink([])
    info = attempt(clock, sink)
    barrier = threading.Barrier(8)

    def beat(n: int) -> None:
        barrier.wait()
        info.heartbeat({"n": n})

    threads = [threading.Thread(target=beat, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(sink.writes) == 1


def test_oversized_details_warn_keep_the_previous_ones_and_go_on(
    clock: ManualClock, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.WEFT = {**getattr(settings, "WEFT", {}), "MAX_PAYLOAD_BYTES": 1_000}
    sink = FakeSink([])
    info = attempt(clock, sink)
    info.heartbeat({"step": 1})
    clock.advance(2_000)
    with caplog.at_level(logging.WARNING, logger="weft_django.engine"):
        info.heartbeat({"blob": "x" * 5_000})  # no exception: the activity goes on
    assert control_of(info).last_beat_ms == clock.now, "liveness still counts"
    assert control_of(info).details == {"step": 1}
    assert sink.writes == [{"step": 1}], "nothing written for the refused details"
    [record] = [r for r in caplog.records if "heartbeat" in r.getMessage()]
    message = record.getMessage()
    assert record.levelno == logging.WARNING
    assert "'wf-beat'" in message and "position 3" in message
    assert "5012 bytes" in message and "MAX_PAYLOAD_BYTES (1000)" in message
    # The refused beat reserved no write: the next valid one is written at once.
    info.heartbeat({"step": 2})
    assert sink.writes == [{"step": 1}, {"step": 2}]


def test_unencodable_details_warn_and_go_on(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    sink = FakeSink([])
    info = attempt(clock, sink)
    with caplog.at_level(logging.WARNING, logger="weft_django.engine"):
        info.heartbeat({"ratio": math.nan})
        info.heartbeat(object())
    assert sink.writes == []
    messages = [r.getMessage() for r in caplog.records if "heartbeat" in r.getMessage()]
    assert len(messages) == 2
    assert "nan" in messages[0] and "not JSON-serialisable" in messages[1]


def test_a_cancelled_attempt_raises_activity_cancelled(clock: ManualClock) -> None:
    sink = FakeSink([])
    info = attempt(clock, sink)
    control_of(info).cancel("workflow cancelled")
    control_of(info).cancel("a later reason")  # the first reason wins
    with pytest.raises(ActivityCancelled) as caught:
        info.heartbeat({"done": 1})
    assert caught.value.workflow_id == "wf-beat"
    assert caught.value.reason == "workflow cancelled"
    assert caught.value.code == "activity_cancelled" and caught.value.http_status == 409
    assert sink.writes == []


def test_a_refused_write_cancels_the_attempt_and_raises(clock: ManualClock) -> None:
    sink = FakeSink([], refuse_with="claim lost")
    info = attempt(clock, sink)
    with pytest.raises(ActivityCancelled, match="claim lost"):
        info.heartbeat({"done": 1})
    assert control_of(info).cancelled and control_of(info).cancel_reason == "claim lost"
    sink.refuse_with = None
    clock.advance(5_000)
    with pytest.raises(ActivityCancelled, match="claim lost"):  # stays cancelled
        info.heartbeat({"done": 2})
    assert sink.writes == []


def test_a_cancel_during_the_write_raises_after_it(clock: ManualClock) -> None:
    info = attempt(clock)
    control = control_of(info)

    def cancelling_sink(details: Any) -> None:
        control.cancel("run is suspended")  # the turn saw it meanwhile

    control.sink = cancelling_sink
    with pytest.raises(ActivityCancelled, match="run is suspended"):
        info.heartbeat({"done": 1})


def test_without_a_sink_only_liveness_is_recorded(clock: ManualClock) -> None:
    info = attempt(clock, sink=None)
    clock.advance(300)
    info.heartbeat({"done": 1})
    assert control_of(info).last_beat_ms == clock.now
    assert control_of(info).details == {"done": 1}


def test_an_info_built_by_hand_cannot_heartbeat() -> None:
    info = ActivityInfo("wf-hand", "r", 0, 1, 1, "wf-hand:0", None)
    with pytest.raises(RuntimeError, match="only works inside an activity the engine runs"):
        info.heartbeat({"done": 1})
