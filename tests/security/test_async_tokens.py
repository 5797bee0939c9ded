"""Async-activity tokens are unguessable, single use, and stored only as a hash.

Why: the token alone authorises ``async-activities/<token>/complete|fail/``
without a login (SPEC §5), so it is a bearer credential. It must carry at
least 128 random bits, work once, and never sit in the database, the logs or
a warning in raw form: a leaked database dump or log stream must not let
anyone complete a payment callback. Tokens are minted through the real code
path (an engine running ``ctx.async_activity`` and handing the token to an
activity), never built by hand.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import string
import threading
import warnings
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.apps import apps
from django.db import connection, connections
from rest_framework.test import APIClient

from tests.security import workflows as wf
from weft_django import client
from weft_django.errors import AsyncActivityTokenError
from weft_django.models import AsyncActivity, JournalEntry, Timer, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)

#: Tokens measured for entropy and uniqueness (two runs of ``sec-async-many``).
SAMPLE_RUNS = 2
TOKENS_PER_RUN = 128
MIN_BITS = 128


def _complete_url(token: str, action: str = "complete") -> str:
    return f"/api/weft/async-activities/{token}/{action}/"


def _mint(weft_env: Any, workflow_id: str, data: Any = "x") -> str:
    client.start("sec-async", data, workflow_id=workflow_id)
    weft_env.run_until_idle()
    assert len(wf.TOKENS) == 1, wf.TOKENS
    return wf.TOKENS[-1]


def _all_rows() -> Iterator[tuple[str, str, str]]:
    """``(table, column, text)`` of every column of every row of every table."""
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            columns = [c[0] for c in cursor.description]
            for row in cursor.fetchall():
                for column, value in zip(columns, row, strict=True):
                    if isinstance(value, memoryview | bytes):
                        value = bytes(value).decode("latin-1")
                    yield table, column, str(value)


def _weft_model_values() -> Iterator[tuple[str, str, str]]:
    """``(model, field, text)`` of every field of every weft model row, via the ORM."""
    for model in apps.get_app_config("weft").get_models():
        for row in model.objects.values():
            for field, value in row.items():
                yield model._meta.label, field, json.dumps(value, default=str)


def _assert_not_stored(token: str) -> int:
    """The raw token occurs in no column of any row; returns the cells scanned."""
    hits = [(t, c) for t, c, text in _all_rows() if token in text]
    hits += [(m, f) for m, f, text in _weft_model_values() if token in text]
    assert hits == [], f"raw token found in {hits}"
    return sum(1 for _ in _all_rows())


def _snapshot() -> dict[str, list[str]]:
    return {
        model._meta.label: sorted(map(repr, model.objects.order_by("pk").values_list()))
        for model in apps.get_app_config("weft").get_models()
    }


def test_tokens_carry_at_least_128_random_bits(weft_env: Any) -> None:
    """Length × alphabet ≥ 128 bits, the journaled nonce behind each is ≥ 128 bits,
    every token is distinct, and hex digits are spread evenly (no constant part)."""
    for i in range(SAMPLE_RUNS):
        client.start("sec-async-many", {"n": TOKENS_PER_RUN}, workflow_id=f"sec-many-{i}")
    weft_env.run_until_idle(timeout=120)
    tokens = list(wf.TOKENS)
    n = SAMPLE_RUNS * TOKENS_PER_RUN
    assert len(tokens) == n and len(set(tokens)) == n  # unique
    alphabet = set("".join(tokens))
    lengths = {len(t) for t in tokens}
    assert len(lengths) == 1
    length = lengths.pop()
    assert alphabet <= set(string.hexdigits.lower())
    format_bits = length * math.log2(len(set(string.hexdigits.lower())))
    assert format_bits >= MIN_BITS

    # Where the randomness comes from: a nonce journaled per token (the token is
    # an HMAC of it under SECRET_KEY). Its size bounds the token's entropy.
    nonces = [
        e.result["nonce"]
        for e in JournalEntry.objects.filter(kind="async-token").order_by("run", "position")
    ]
    assert len(nonces) == n and len(set(nonces)) == n
    nonce_bits = {len(x) * 4 for x in nonces if set(x) <= set(string.hexdigits)}
    assert len(nonce_bits) == 1 and nonce_bits.pop() >= MIN_BITS

    # Per position, each hex digit should appear ~n/16 times; a fixed or
    # low-entropy position (a counter, a timestamp) fails this chi-square.
    expected = n / 16
    worst = 0.0
    for position in range(length):
        counts = Counter(t[position] for t in tokens)
        chi2 = sum((counts.get(d, 0) - expected) ** 2 / expected for d in "0123456789abcdef")
        worst = max(worst, chi2)
    overall = Counter("".join(tokens))
    overall_chi2 = sum((c - n * length / 16) ** 2 / (n * length / 16) for c in overall.values())
    shannon = -sum(c / (n * length) * math.log2(c / (n * length)) for c in overall.values())
    # 15 degrees of freedom: p = 1e-6 is ~ 53; the worst of 64 positions is rarely above 40.
    assert worst < 60, worst
    assert overall_chi2 < 60, overall_chi2
    assert shannon > 3.99, shannon
    print(
        f"\n[token entropy] {n} tokens, all distinct; length {length} over a "
        f"{len(alphabet)}-symbol alphabet = {format_bits:.0f} bits of format; journaled "
        f"nonce = {len(nonces[0]) * 4} bits (the entropy bound); Shannon {shannon:.4f} "
        f"bits/char; chi2 overall {overall_chi2:.1f}, worst position {worst:.1f} (15 df)"
    )


def test_a_token_completes_once_and_a_second_use_changes_nothing(weft_env: Any) -> None:
    """Second complete (or fail) with the same token: 409 ``used`` and no write at all."""
    token = _mint(weft_env, "sec-once")
    anon = APIClient()
    first = anon.post(_complete_url(token), {"result": {"paid": 1}}, format="json")
    assert first.status_code == 200 and first.json() == {"status": "completed"}
    before = _snapshot()
    for action, body in (
        ("complete", {"result": {"paid": 2}}),
        ("fail", {"error": {"message": "x"}}),
    ):
        again = anon.post(_complete_url(token, action), body, format="json")
        assert again.status_code == 409, again.json()
        assert again.json() == {
            "code": "async_activity_token",
            "kind": "used",
            "message": "This async-activity token was already used; a token completes once.",
        }
        assert _snapshot() == before
    with pytest.raises(AsyncActivityTokenError) as excinfo:
        client.complete_async_activity(token, {"paid": 3})
    assert excinfo.value.kind == "used" and "already used" in str(excinfo.value)
    assert _snapshot() == before

    weft_env.run_until_idle()
    run = WorkflowRun.objects.get(workflow_id="sec-once")
    assert run.status == "completed" and run.result["result"] == {"paid": 1}
    # Still refused once the run is over; the recorded result is the first one.
    assert anon.post(_complete_url(token), {"result": 4}, format="json").status_code == 409
    assert WorkflowRun.objects.get(workflow_id="sec-once").result == run.result


def test_racing_completions_of_one_token_let_exactly_one_through(weft_env: Any) -> None:
    """Eight threads complete the same token at once: one wins, seven get ``used``."""
    token = _mint(weft_env, "sec-race")
    racers = 8
    barrier = threading.Barrier(racers)
    outcomes: list[Any] = [None] * racers

    def race(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            client.complete_async_activity(token, {"winner": i})
            outcomes[i] = "ok"
        except AsyncActivityTokenError as exc:
            outcomes[i] = exc.kind
        except Exception as exc:  # reported below, not swallowed
            outcomes[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(map(str, outcomes)) == ["ok"] + ["used"] * (racers - 1), outcomes
    row = AsyncActivity.objects.get(pk=hashlib.sha256(token.encode()).hexdigest())
    assert row.status == "completed" and row.result == {"winner": outcomes.index("ok")}


def test_only_the_hash_of_a_token_is_stored(weft_env: Any) -> None:
    """No column of any row of any table holds the raw token, before or after use."""
    token = _mint(weft_env, "sec-hash", {"order": "o-1"})
    row = AsyncActivity.objects.get()
    assert row.pk == hashlib.sha256(token.encode()).hexdigest() != token  # what is stored
    cells = _assert_not_stored(token)
    assert cells > 0
    assert client.complete_async_activity(token, {"ok": True}) is None
    weft_env.run_until_idle()
    assert WorkflowRun.objects.get(workflow_id="sec-hash").status == "completed"
    _assert_not_stored(token)


def test_staff_views_never_show_the_raw_token(weft_env: Any, django_user_model: Any) -> None:
    """Detail, history and the admin page of a parked run: a hash prefix at most."""
    token = _mint(weft_env, "sec-views")
    staff = django_user_model.objects.create_superuser("root", password="pw")
    api = APIClient()
    api.force_login(staff)
    pages = [
        api.get("/api/weft/workflows/sec-views/"),
        api.get("/api/weft/workflows/sec-views/history/"),
        api.get("/api/weft/claims/"),
    ]
    run = WorkflowRun.objects.get(workflow_id="sec-views")
    pages.append(api.get(f"/admin/weft/workflowrun/{run.pk}/change/"))
    pages.append(api.get("/admin/weft/workflowrun/"))
    for page in pages:
        assert page.status_code == 200
        assert token not in page.content.decode()
    detail = pages[0].json()["pending_async_token"]
    assert token.startswith(detail["token_hash_prefix"]) is False
    assert hashlib.sha256(token.encode()).hexdigest().startswith(detail["token_hash_prefix"])


def test_no_token_in_logs_or_warnings(weft_env: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Every record and warning emitted while a token is minted, handed out, used
    and reused (at DEBUG, every logger) is free of the raw token."""
    caplog.set_level(logging.DEBUG)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        token = _mint(weft_env, "sec-logs")
        APIClient().post(_complete_url(token), {"result": 1}, format="json")
        APIClient().post(_complete_url(token), {"result": 2}, format="json")  # 409
        APIClient().post(_complete_url(token + "0"), {"result": 3}, format="json")  # 404
        weft_env.run_until_idle()
    assert WorkflowRun.objects.get(workflow_id="sec-logs").status == "completed"
    assert caplog.records, "nothing was logged: the check would be vacuous"
    for record in caplog.records:
        text = record.getMessage() + repr(record.__dict__) + (record.exc_text or "")
        assert token not in text, record
    for warning in caught:
        assert token not in str(warning.message) + repr(vars(warning.message)), warning


def test_a_refused_call_with_a_valid_token_logs_it_redacted(
    weft_env: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A bad body (400) or a missing slash (404) sent with a still-valid token:
    Django would log ``"Bad Request: <path with the token>"``; weft logs the path
    with the token's hash prefix instead, and the token still works afterwards."""
    caplog.set_level(logging.DEBUG)
    token = _mint(weft_env, "sec-redact")
    prefix = hashlib.sha256(token.encode()).hexdigest()[:12]
    bad_body = APIClient().post(_complete_url(token, "fail"), {"error": 3}, format="json")
    assert bad_body.status_code == 400
    no_slash = APIClient().post(_complete_url(token).rstrip("/"), {}, format="json")
    assert no_slash.status_code == 404
    lines = [r.getMessage() for r in caplog.records if r.name == "django.request"]
    assert lines == [
        f"Bad Request: /api/weft/async-activities/<token sha256:{prefix}>/fail/",
        f"Not Found: /api/weft/async-activities/<token sha256:{prefix}>/complete",
    ]
    for record in caplog.records:
        assert token not in record.getMessage() + repr(record.__dict__), record
    ok = APIClient().post(_complete_url(token), {"result": 1}, format="json")
    assert ok.status_code == 200  # the refused calls did not spend it


def test_a_failed_hand_out_does_not_store_the_token_in_its_error(weft_env: Any) -> None:
    """While the hand-out's retry is pending, the raw token is nowhere in the database.

    A failed hand-out's exception text (an HTTP callback's, say) can hold the
    raw, still valid token; the engine cuts it out before storing the error
    in the retry timer, so it is found nowhere — but "<token>" is.
    """
    client.start("sec-async-flaky", None, workflow_id="sec-flaky")
    weft_env.run_until_idle()
    assert len(wf.FLAKY_CALLS) == 1  # first attempt failed, a retry timer waits
    token = wf.FLAKY_CALLS[0]
    assert AsyncActivity.objects.get().status == "pending"  # the token is live
    hits = {(t, c) for t, c, text in _all_rows() if token in text}
    hits |= {(m, f) for m, f, text in _weft_model_values() if token in text}
    assert hits == set(), f"raw token found in {hits}"
    timer = Timer.objects.get(kind="retry")
    assert "<token>" in timer.payload["error"], timer.payload
