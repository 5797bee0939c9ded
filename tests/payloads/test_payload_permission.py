"""Decoded payloads are shown by the admin, the API and ``weft show`` only to a
user holding ``weft.view_payload``; others see the size and "hidden"."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from weft_django import activity, client, workflow

MARKER = "PERM-MARKER-5d1e"
KEY = Fernet.generate_key().decode()


@activity(name="pp-echo")
def pp_echo(value: Any) -> Any:
    return value


@workflow(name="pp-flow")
def pp_flow(ctx: Any, data: Any) -> Any:
    return (yield ctx.run(pp_echo, data))


def _user(django_user_model: Any, name: str, *, payloads: bool) -> Any:
    user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
    codenames = ["view_workflowrun", "view_journalentry"] + (["view_payload"] if payloads else [])
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


@pytest.fixture
def finished(weft_env: Any, settings: Any) -> Any:
    settings.WEFT = {
        **getattr(settings, "WEFT", {}),
        "PAYLOAD_CODECS": ["weft_django.codecs.Encrypt"],
        "ENCRYPTION_KEYS": [KEY],
    }
    h = client.start("pp-flow", {"note": MARKER}, workflow_id="pp-1")
    weft_env.run_until_idle()
    assert h.status() == "completed"
    return h


@pytest.mark.django_db(transaction=True)
def test_admin_shows_decoded_payloads_only_with_the_permission(finished, django_user_model):
    page = f"/admin/weft/workflowrun/{finished.run_id}/change/"
    allowed, denied = Client(), Client()
    allowed.force_login(_user(django_user_model, "reader", payloads=True))
    denied.force_login(_user(django_user_model, "clerk", payloads=False))
    seen = allowed.get(page)
    assert seen.status_code == 200
    assert MARKER in seen.content.decode()
    hidden = denied.get(page)
    assert hidden.status_code == 200
    text = hidden.content.decode()
    assert MARKER not in text
    assert "hidden" in text and "size" in text


@pytest.mark.django_db(transaction=True)
def test_api_shows_decoded_payloads_only_with_the_permission(finished, django_user_model):
    allowed, denied = APIClient(), APIClient()
    allowed.force_login(_user(django_user_model, "reader", payloads=True))
    denied.force_login(_user(django_user_model, "clerk", payloads=False))
    body = allowed.get("/api/weft/workflows/pp-1/").json()
    assert body["input"] == {"note": MARKER}
    assert body["result"] == {"note": MARKER}
    hidden = denied.get("/api/weft/workflows/pp-1/").json()
    assert hidden["input"]["hidden"] is True and hidden["input"]["size"] > 0
    assert MARKER not in json.dumps(hidden)


@pytest.mark.django_db(transaction=True)
def test_weft_show_as_a_user(finished, django_user_model):
    _user(django_user_model, "clerk", payloads=False)
    out = io.StringIO()
    call_command("weft", "show", "pp-1", "--json", stdout=out)
    assert json.loads(out.getvalue())["input"] == {"note": MARKER}
    out = io.StringIO()
    call_command("weft", "show", "pp-1", "--json", "--as-user", "clerk", stdout=out)
    shown = json.loads(out.getvalue())
    assert shown["input"]["hidden"] is True
    assert MARKER not in out.getvalue()
