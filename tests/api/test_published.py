"""``GET workflows/<id>/events/``, ``events/<key>/?wait=`` and the SSE ``streams/<key>/``.

Through Django's test client (the WSGI path: a ``StreamingHttpResponse`` of
a sync generator); ``tests/engines/test_sse_live.py`` reads the stream over
real HTTP from live WSGI and ASGI servers.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import url
from weft_django import client, workflow
from weft_django.models import StreamEntry, WorkflowEvent

pytestmark = pytest.mark.django_db(transaction=True)


@workflow(name="api-publish")
def api_publish(ctx: Any, data: Any) -> Any:
    ctx.set_event("status", "started")
    for i in range(3):
        ctx.write_stream("progress", {"pct": (i + 1) * 33})
    ctx.set_event("status", "waiting")
    yield ctx.wait_for_signal("go")
    ctx.close_stream("progress")
    return "ok"


def _sse(response: Any) -> str:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    return b"".join(response.streaming_content).decode()


def test_events_list_and_one_event(api: Any, weft_env: Any) -> None:
    client.start("api-publish", None, workflow_id="pub-1")
    weft_env.run_until_idle()
    listed = api.get(url("workflows/pub-1/events/"))
    assert listed.status_code == 200, listed.json()
    assert listed.json()["events"] == {"status": "waiting"}
    one = api.get(url("workflows/pub-1/events/status/"))
    assert one.status_code == 200 and one.json()["value"] == "waiting"
    assert one.json()["key"] == "status"
    missing = api.get(url("workflows/pub-1/events/nope/"), {"wait": "0.05"})
    assert missing.status_code == 404 and missing.json()["code"] == "event_not_set"
    client.signal("pub-1", "go", None)
    weft_env.run_until_idle()
    finished = api.get(url("workflows/pub-1/events/nope/"), {"wait": "1"})
    assert finished.status_code == 409 and finished.json()["code"] == "workflow_finished"


@pytest.mark.parametrize(
    ("wait", "says"),
    [
        ("31", "wait=31 is outside 0 to 30 seconds"),
        ("-1", "wait=-1"),
        ("abc", "'abc'"),
        ("nan", "'nan'"),
        ("inf", "'inf'"),
    ],
)
def test_wait_is_bounded(api: Any, wait: str, says: str) -> None:
    client.start("api-publish", None, workflow_id="pub-2")
    response = api.get(url("workflows/pub-2/events/status/"), {"wait": wait})
    assert response.status_code == 400, response.json()
    assert says in response.json()["errors"]["wait"][0]


def test_unknown_workflow_and_bad_keys(api: Any) -> None:
    for path in (
        "workflows/pub-none/events/",
        "workflows/pub-none/events/k/",
        "workflows/pub-none/streams/k/",
    ):
        response = api.get(url(path))
        assert response.status_code == 404 and response.json()["code"] == "workflow_not_found"
    client.start("api-publish", None, workflow_id="pub-3")
    long_key = "k" * 101
    for path in (f"workflows/pub-3/events/{long_key}/", f"workflows/pub-3/streams/{long_key}/"):
        response = api.get(url(path))
        assert response.status_code == 400 and response.json()["code"] == "invalid_payload"
    bad = api.get(url("workflows/pub-3/streams/progress/"), HTTP_LAST_EVENT_ID="x")
    assert bad.status_code == 400 and "Last-Event-ID" in str(bad.json()["errors"])


def test_sse_stream_and_resume(api: Any, weft_env: Any) -> None:
    client.start("api-publish", None, workflow_id="pub-4")
    weft_env.run_until_idle()
    client.signal("pub-4", "go", None)
    weft_env.run_until_idle()
    text = _sse(api.get(url("workflows/pub-4/streams/progress/"), HTTP_ACCEPT="text/event-stream"))
    assert text.startswith("retry: 1000\n\n")
    assert 'id: 0\ndata: {"pct": 33}\n\n' in text
    assert 'id: 2\ndata: {"pct": 99}\n\n' in text
    assert text.endswith("event: end\ndata: {}\n\n")
    resumed = _sse(api.get(url("workflows/pub-4/streams/progress/"), HTTP_LAST_EVENT_ID="1"))
    assert "id: 0\n" not in resumed and "id: 1\n" not in resumed and "id: 2\n" in resumed
    from_offset = _sse(api.get(url("workflows/pub-4/streams/progress/"), {"offset": "2"}))
    assert "id: 1\n" not in from_offset and "id: 2\n" in from_offset
    head = api.head(url("workflows/pub-4/streams/progress/"))
    assert head.status_code == 200 and head.content == b""


def test_refused_callers_read_nothing(anon: Any, plain: Any) -> None:
    client.start("api-publish", None, workflow_id="pub-5")
    for caller in (anon, plain):
        for path in ("events/", "events/status/", "streams/progress/"):
            response = caller.get(url(f"workflows/pub-5/{path}"))
            assert response.status_code == 403
    assert not WorkflowEvent.objects.exists() and not StreamEntry.objects.exists()
