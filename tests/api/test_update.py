"""``POST workflows/<id>/update/``: the answer, and the error codes of a refused update.

The request waits for the owner, so the engine is driven in another thread
while it waits.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.api.conftest import url
from tests.e2e.helpers import row_counts
from weft_django import client
from weft_django.models import UpdateRequest

pytestmark = pytest.mark.django_db(transaction=True)

PATH = "workflows/{}/update/"


def _post(api: Any, workflow_id: str, body: dict[str, Any]) -> Any:
    return api.post(url(PATH.format(workflow_id)), body, format="json")


def _post_driving(api: Any, env: Any, workflow_id: str, body: dict[str, Any]) -> Any:
    """The request in this thread; the engine driven in another until it is answered."""
    done = threading.Event()
    errors: list[BaseException] = []

    def drive() -> None:
        from django.db import connection

        try:
            while not done.is_set():
                env.run_until_idle()
                done.wait(0.02)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=drive, name="test-engine")
    thread.start()
    try:
        response = _post(api, workflow_id, body)
    finally:
        done.set()
        thread.join(60)
    assert not errors, errors
    return response


@pytest.fixture
def cart(weft_env: Any) -> str:
    import tests.e2e.test_updates  # noqa: F401  (registers "upd-cart")

    client.start("upd-cart", None, workflow_id="upd-api")
    weft_env.run_until_idle()
    return "upd-api"


def test_update_answers_once_per_update_id(api: Any, weft_env: Any, cart: str) -> None:
    body = {"name": "add", "args": ["apple"], "update_id": "api-u1"}
    first = _post_driving(api, weft_env, cart, body)
    assert first.status_code == 200, first.json()
    assert first.json() == {"workflow_id": cart, "name": "add", "result": 1}
    again = _post_driving(api, weft_env, cart, body)
    assert again.json()["result"] == 1
    assert client.query(cart, "items") == ["apple"]
    generator = _post_driving(api, weft_env, cart, {"name": "add-priced", "args": ["fig"]})
    assert generator.json()["result"] == {"count": 2, "price": 30}


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"name": "add", "args": [""]}, 422, "update_rejected"),
        ({"name": "nope"}, 404, "unknown_update"),
        ({"name": ""}, 400, "invalid"),
        ({"name": "add", "args": "x"}, 400, "invalid"),
        ({"name": "add", "args": ["x"], "timeout": 61}, 400, "invalid"),
        ({"name": "add", "args": ["x"], "update_id": ""}, 400, "invalid"),
    ],
)
def test_refused_updates_write_nothing(
    api: Any, cart: str, body: dict[str, Any], status: int, code: str
) -> None:
    before = row_counts()
    response = _post(api, cart, body)
    assert response.status_code == status, response.json()
    assert response.json()["code"] == code
    assert row_counts() == before and not UpdateRequest.objects.exists()


def test_unknown_workflow_timeout_and_failing_handler(api: Any, weft_env: Any, cart: str) -> None:
    assert _post(api, "upd-nobody", {"name": "add"}).json()["code"] == "workflow_not_found"
    late = _post(api, cart, {"name": "add", "args": ["kiwi"], "timeout": 0.1})
    assert late.status_code == 504 and late.json()["code"] == "workflow_timeout"
    failed = _post_driving(api, weft_env, cart, {"name": "boom"})
    assert failed.status_code == 400 and failed.json()["code"] == "update_failed"
    assert "KeyError" in failed.json()["message"]
