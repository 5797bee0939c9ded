"""One way to show a time: the project's zone, seconds, a relative form; no epoch ms.

The admin's run list, run pages, timers, claims and engines pages, ``weft
show`` and the demo print instants through ``inspection.format``: no page a
person reads carries an epoch-millisecond number, and the zone is
``settings.TIME_ZONE``.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from tests.cli.helpers import weft
from tests.inspect.conftest import Populated
from weft_django.inspection import format_instant, relative
from weft_django.models import EngineRecord, Timer, WorkflowClaim, WorkflowRun

#: An epoch-millisecond instant of this century (13 digits starting 1).
EPOCH_MS = re.compile(r"(?<![\d.-])1[5-9]\d{11}(?!\d)")


def _no_epoch_ms(text: str, where: str) -> None:
    found = EPOCH_MS.findall(text)
    assert not found, f"{where} shows epoch milliseconds: {found[:3]}"


def test_an_instant_in_the_project_zone_with_seconds_and_relative(settings: Any) -> None:
    settings.TIME_ZONE = "Europe/Paris"
    moment = dt.datetime(2026, 12, 7, 18, 24, 33, tzinfo=dt.UTC)
    ms = int(moment.timestamp() * 1000)
    assert format_instant(ms) == "2026-12-07 19:24:33 CET"
    assert format_instant(moment, with_relative=True, relative_to=ms - 7_200_000).endswith(
        "(in 2 h)"
    )
    assert relative(-180) == "3 min ago" and relative(0.2) == "now"
    assert format_instant(None) == "-"


@pytest.mark.django_db(transaction=True)
def test_the_admin_pages_a_person_reads_show_no_epoch_ms(
    populated: Populated, admin_client: Client
) -> None:
    pages = {
        "run list": reverse("admin:weft_workflowrun_changelist"),
        "claims": reverse("admin:weft_workflowclaim_changelist"),
        "engines": reverse("admin:weft_enginerecord_changelist"),
        "engine": reverse("admin:weft_enginerecord_change", args=[EngineRecord.objects.first().pk]),
        "claim": reverse(
            "admin:weft_workflowclaim_change", args=[WorkflowClaim.objects.first().pk]
        ),
    }
    for wid in (populated.sleeper, populated.waiter, populated.failing, populated.done):
        run = WorkflowRun.objects.get(workflow_id=wid)
        pages[wid] = reverse("admin:weft_workflowrun_change", args=[run.pk])
    assert Timer.objects.exists()
    for where, url in pages.items():
        response = admin_client.get(url)
        assert response.status_code == 200, where
        _no_epoch_ms(response.content.decode(), where)
    sleeper = admin_client.get(pages[populated.sleeper]).content.decode()
    assert re.search(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \((now|\d+(\.\d)? (ms|s|min) ago)\)", sleeper
    )
    done = admin_client.get(pages[populated.done]).content.decode()
    assert "Duration:" in done and "so far" not in done.split("Duration:")[1][:200]


@pytest.mark.django_db(transaction=True)
def test_weft_show_text_shows_local_seconds_and_no_epoch_ms(populated: Populated) -> None:
    text = weft("show", populated.sleeper).out
    _no_epoch_ms(text, "weft show")
    assert re.search(r"created:   \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(", text)
    assert "the sleep to end in" in text


@pytest.mark.django_db(transaction=True)
def test_the_demo_prints_no_epoch_ms_and_no_reprs() -> None:
    out = io.StringIO()
    call_command("weft_demo", "--sleep", "0.1", "--timeout", "60", stdout=out)
    text = out.getvalue()
    _no_epoch_ms(text, "the demo")
    assert "claim history:" in text and "demo finished" in text
    assert "{'" not in text  # JSON, not a Python repr
