"""ctx.async_activity: the token is journaled, handed out once, completed or
failed from outside through the client, and single use."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.e2e.helpers import journal, latest, row_counts, run_state
from weft_django import activity, client, workflow
from weft_django.engine.journal import async_token
from weft_django.errors import ActivityError, AsyncActivityTokenError, WorkflowTimeoutError
from weft_django.models import AsyncActivity, JournalEntry

TOKENS: list[tuple[str, str]] = []
HANDOUT_FAILURES: dict[str, int] = {}


@pytest.fixture(autouse=True)
def _reset():
    TOKENS.clear()
    HANDOUT_FAILURES.clear()


@activity(retries=2, backoff=timedelta(seconds=5))
def request_payment(token: str, order_id: str) -> None:
    if HANDOUT_FAILURES.get(order_id, 0) > 0:
        HANDOUT_FAILURES[order_id] -= 1
        TOKENS.append((order_id, token))
        raise ConnectionError("payment gateway down")
    TOKENS.append((order_id, token))


@workflow(name="async-pay")
def async_pay(ctx, data):
    try:
        paid = yield ctx.async_activity(request_payment, data["order"], timeout=data.get("timeout"))
    except ActivityError as exc:
        return {"failed": exc.message, "type": exc.error_type}
    except WorkflowTimeoutError as exc:
        return {"timed_out": exc.what}
    return {"paid": paid}


@workflow(name="async-plain-name")
def async_plain_name(ctx, data):
    return (yield ctx.async_activity("manual-review"))


def _token_for(order: str) -> str:
    tokens = [t for o, t in TOKENS if o == order]
    assert tokens, f"no token was handed out for {order}"
    return tokens[-1]


@pytest.mark.django_db(transaction=True)
def test_completion_reaches_the_workflow(weft_env):
    h = client.start("async-pay", {"order": "o-1"}, workflow_id="async-1")
    weft_env.run_until_idle()
    assert h.status() == "parked"
    assert len(TOKENS) == 1, "the token is handed out exactly once"
    token = _token_for("o-1")
    assert len(token) >= 32
    row = AsyncActivity.objects.get(run_id=h.run_id)
    assert row.status == "pending"
    assert token not in (row.pk, str(row.pk))  # stored hashed
    assert [k for k, _ in journal(h.run_id)] == ["async-token", "async-handout"]

    weft_env.run_until_idle()  # nothing to do: the hand-out does not run again
    assert len(TOKENS) == 1

    client.complete_async_activity(token, {"receipt": "r-9"})
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == {"paid": {"receipt": "r-9"}}
    assert AsyncActivity.objects.get(run_id=h.run_id).status == "completed"
    assert len(TOKENS) == 1


@pytest.mark.django_db(transaction=True)
def test_failure_raises_activity_error_in_the_workflow(weft_env):
    h = client.start("async-pay", {"order": "o-2"}, workflow_id="async-2")
    weft_env.run_until_idle()
    client.fail_async_activity(_token_for("o-2"), "card declined")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"failed": "card declined", "type": "AsyncActivityFailed"}


@pytest.mark.django_db(transaction=True)
def test_handout_is_retried_with_the_same_token(weft_env):
    HANDOUT_FAILURES["o-3"] = 1
    h = client.start("async-pay", {"order": "o-3"}, workflow_id="async-3")
    weft_env.run_until_idle()
    assert len(TOKENS) == 1
    weft_env.advance(timedelta(seconds=5))
    weft_env.run_until_idle()
    assert len(TOKENS) == 2
    assert TOKENS[0][1] == TOKENS[1][1], "a retried hand-out must carry the journaled token"
    assert AsyncActivity.objects.filter(run_id=h.run_id).count() == 1
    client.complete_async_activity(TOKENS[1][1], 42)
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"paid": 42}


@pytest.mark.django_db(transaction=True)
def test_unknown_and_reused_tokens_are_refused_and_change_nothing(weft_env):
    h = client.start("async-pay", {"order": "o-4"}, workflow_id="async-4")
    weft_env.run_until_idle()
    token = _token_for("o-4")

    counts, state = row_counts(), run_state("async-4")
    for bogus in ("not-a-token", "", token[:-1] + ("0" if token[-1] != "0" else "1")):
        with pytest.raises(AsyncActivityTokenError) as info:
            client.complete_async_activity(bogus, 1)
        assert info.value.kind == "unknown"
        with pytest.raises(AsyncActivityTokenError) as info:
            client.fail_async_activity(bogus, "x")
        assert info.value.kind == "unknown"
    assert row_counts() == counts
    assert run_state("async-4") == state
    assert AsyncActivity.objects.get(run_id=h.run_id).status == "pending"

    client.complete_async_activity(token, "first")
    after_first = run_state("async-4")
    row = AsyncActivity.objects.get(run_id=h.run_id)
    with pytest.raises(AsyncActivityTokenError) as info:
        client.complete_async_activity(token, "second")
    assert info.value.kind == "used"
    with pytest.raises(AsyncActivityTokenError) as info:
        client.fail_async_activity(token, "late failure")
    assert info.value.kind == "used"
    again = AsyncActivity.objects.get(run_id=h.run_id)
    assert (again.status, again.result, again.error) == (row.status, row.result, row.error)
    assert run_state("async-4") == after_first

    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"paid": "first"}
    with pytest.raises(AsyncActivityTokenError) as info:
        client.complete_async_activity(token, "after the end")
    assert info.value.kind == "used"


@pytest.mark.django_db(transaction=True)
def test_async_activity_timeout(weft_env):
    h = client.start("async-pay", {"order": "o-5", "timeout": 300}, workflow_id="async-5")
    weft_env.run_until_idle()
    token = _token_for("o-5")
    weft_env.advance(timedelta(seconds=299))
    weft_env.run_until_idle()
    assert h.status() == "parked"
    weft_env.advance(timedelta(seconds=1))
    weft_env.run_until_idle()
    name = "tests.e2e.test_async_activity.request_payment"
    assert h.result(timeout=1) == {"timed_out": f"async activity {name!r}"}
    with pytest.raises(AsyncActivityTokenError) as info:
        client.complete_async_activity(token, "too late")
    assert info.value.kind == "used"


@pytest.mark.django_db(transaction=True)
def test_plain_name_target_parks_with_a_pending_token(weft_env):
    h = client.start("async-plain-name", None, workflow_id="async-6")
    weft_env.run_until_idle()
    assert h.status() == "parked"
    row = AsyncActivity.objects.get(run_id=h.run_id)
    assert (row.target, row.status) == ("manual-review", "pending")
    assert [k for k, _ in journal(h.run_id)] == ["async-token"]
    assert latest("async-6").status == "parked"
    # Whoever hands the token out (the API detail, the admin) rebuilds it from the journal.
    nonce = JournalEntry.objects.get(run_id=h.run_id, kind="async-token").result["nonce"]
    token = async_token(h.run_id, row.position, nonce)
    client.complete_async_activity(token, {"approved": True})
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"approved": True}
