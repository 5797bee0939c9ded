"""No workflow id, token or payload reaches a metric label; warnings carry only
the workflow id (and closed-set or engine fields) about a workflow.

Why: ``/metrics`` is usually scraped without authentication and stored for
months, and warnings end up in log pipelines with wide read access. A
workflow id (an order number, an e-mail address: ``[A-Za-z0-9._:@-]``), a
payload or an async token there would leak business data and credentials
and, for ids, explode the series cardinality (SPEC §4.8: "a workflow id is
never a label"). Every workflow here has a distinctive canary id and
payload, runs through the real engine (completed, failed, cancelled,
suspended, parked, deposed mid-turn, claim lost at renewal, a stale wake
discarded), and then every rendering of the metrics is searched for them.
"""

from __future__ import annotations

import ast
import logging
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from prometheus_client import REGISTRY, generate_latest

from tests.security import workflows as wf
from tests.support import ManualClock, type_label_is_bounded
from weft_django import client
from weft_django.engine import Engine
from weft_django.kernel.clock import wall_ms
from weft_django.kernel.schedule_spec import TICK_OUTCOMES
from weft_django.models import WorkflowRun
from weft_django.ownership.guard import confirm_wake_ownership
from weft_django.ownership.metrics import label_value_is_closed, to_prometheus_text
from weft_django.warnings import WAKE_KINDS, WARNING_CLASSES, WeftWarning

pytestmark = pytest.mark.django_db(transaction=True)

ENGINE_ID = "sec-metrics-engine"
WIDS = {
    "parked": "sec-canary-parked-0a91@example.com",
    "completed": "sec-canary-completed-7c2e",
    "failed": "sec-canary-failed-41d0",
    "deposed": "sec-canary-deposed-9e3b",
    "renewal": "sec-canary-renewal-d15a",
}
PAYLOAD = "SEC-CANARY-PAYLOAD-2f6c"
SIGNAL_PAYLOAD = "SEC-CANARY-SIGNAL-8b47"
RESULT = "SEC-CANARY-RESULT-c3e9"
#: The fields a warning's structured log record may carry: its own fields,
#: ``event``, and engine/claim facts passed by the ownership code. Anything new
#: here must be reviewed for what it could carry (never a payload or token).
ALLOWED_LOG_FIELDS = {
    "event",
    "workflow_id",
    "wake_kind",
    "holder_id",
    "reason",
    "engine_id",
    "epoch",
    "during",
    "observed_engine_id",
    "observed_epoch",
    # ``ownership.loss``'s rotated line: a closed description and the actor.
    "what",
    "actor",
    # A failed attempt's and a failed run's lines (``engine.activities.attempt_log``): ids,
    # counts, the exception's type, and its message -- text the activity's own
    # code chose to raise, which a person needs to act on (never a payload weft
    # holds: the canaries below stay out of every record).
    "run_id",
    "activity",
    "attempt",
    "max_attempts",
    "error_type",
    "error_message",
    "retried",
    "retry_at_ms",
}
WARN_HELPERS = {"warn_claim_lost", "warn_wake_discarded", "warn_lease_lost"}

SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


def samples(text: str) -> Iterator[tuple[str, dict[str, str], float]]:
    for line in text.splitlines():
        if line and not line.startswith("#"):
            match = SAMPLE.match(line)
            assert match is not None, line
            labels = {m["key"]: m["value"] for m in LABEL.finditer(match["labels"] or "")}
            yield match["name"], labels, float(match["value"])


@pytest.fixture
def scenario(django_user_model: Any) -> Iterator[dict[str, Any]]:
    """Runs every canary workflow to a distinct end; yields what was seen."""
    clock = ManualClock(start=wall_ms())  # wall time: the collector sees the engine alive
    engine = Engine(engine_id=ENGINE_ID, clock=clock, background_tasks="manual").boot()
    log = logging.getLogger("weft_django")
    handler = _Collect()
    log.addHandler(handler)
    old_level = log.level
    log.setLevel(logging.DEBUG)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            client.start("sec-signal", {"secret": PAYLOAD}, workflow_id=WIDS["parked"])
            client.start("sec-async", {"secret": PAYLOAD}, workflow_id=WIDS["completed"])
            client.start("sec-fail", {"secret": PAYLOAD}, workflow_id=WIDS["failed"])
            client.start("sec-self-cancel", {"secret": PAYLOAD}, workflow_id=WIDS["deposed"])
            client.start("sec-signal", {"secret": PAYLOAD}, workflow_id=WIDS["renewal"])
            engine.run_until_idle()
            (token,) = wf.TOKENS
            client.complete_async_activity(token, {"secret": RESULT})
            client.signal(WIDS["parked"], "other", {"secret": SIGNAL_PAYLOAD})
            # Rotated behind the engine's back: renewal finds the claim lost, and a
            # wake scheduled under the old epoch is discarded by the guard.
            old_epoch = engine.epoch_for(WIDS["renewal"])
            client.suspend(WIDS["renewal"], reason=PAYLOAD)
            engine.run_maintenance()
            decision = confirm_wake_ownership(engine, WIDS["renewal"], "signal", old_epoch)
            engine.run_until_idle()
            engine.heartbeat()
        staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
        api = Client()
        api.force_login(staff)
        for wid in WIDS.values():  # per-id requests: django-prometheus must not label paths
            assert api.get(f"/api/weft/workflows/{wid}/").status_code == 200
        assert api.get(f"/api/weft/workflows/{WIDS['parked']}x/").status_code == 404
        used = Client().post(
            f"/api/weft/async-activities/{token}/complete/", "{}", content_type="application/json"
        )
        assert used.status_code == 409
        yield {
            "engine": engine,
            "token": token,
            "decision": decision,
            "warnings": [w.message for w in caught if isinstance(w.message, WeftWarning)],
            "records": handler.records,
            "api": api,
        }
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)
        engine.dispose(grace=0)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _canaries(token: str) -> list[str]:
    return [*WIDS.values(), PAYLOAD, SIGNAL_PAYLOAD, RESULT, wf.FAIL_MESSAGE, token]


def test_the_scenario_reached_every_end(scenario: dict[str, Any]) -> None:
    """Guards the other tests: each canary workflow really ended where intended."""
    status = {w: r for w, r in WorkflowRun.objects.values_list("workflow_id", "status")}
    assert status == {
        WIDS["parked"]: "parked",
        WIDS["completed"]: "completed",
        WIDS["failed"]: "failed",
        WIDS["deposed"]: "cancelled",
        WIDS["renewal"]: "suspended",
    }
    assert scenario["decision"] == "discard"


def test_no_canary_in_any_metrics_rendering(scenario: dict[str, Any]) -> None:
    """``/metrics``, the default registry, an engine's own text export and the
    API's JSON metrics: none holds an id, payload, error text or token."""
    engine = scenario["engine"]
    scraped = Client().get("/metrics")
    assert scraped.status_code == 200
    renderings = {
        "/metrics": scraped.content.decode(),
        "REGISTRY": generate_latest(REGISTRY).decode(),
        "to_prometheus_text": to_prometheus_text(engine.metrics.snapshot()),
        "api metrics/": scenario["api"].get("/api/weft/metrics/").content.decode(),
    }
    for where, text in renderings.items():
        for canary in _canaries(scenario["token"]):
            assert canary not in text, (where, canary)

    # The export did see the scenario (so the absence above means something).
    found = {(n, tuple(sorted(ls.items()))): v for n, ls, v in samples(renderings["/metrics"])}
    for status in ("parked", "completed", "failed", "cancelled", "suspended"):
        assert found[("weft_workflow_runs", (("status", status),))] == 1, status
    # Both losses were an operator's (cancel, suspend): rotated, never deposed.
    assert found[("weft_workflow_claim_attempts_total", (("outcome", "rotated"),))] >= 2
    assert found[("weft_workflow_claim_attempts_total", (("outcome", "deposed"),))] == 0
    assert found[("weft_workflow_claim_renewal_failures_total", ())] == 0
    assert any(n == "weft_wakes_total" for n, _ in found)
    assert found[("weft_engine_claims_held_max", ())] >= 1
    assert not [ls for _n, ls in found if any(k == "engine_id" for k, _ in ls)]


def test_every_weft_label_value_is_closed_or_a_type_name(scenario: dict[str, Any]) -> None:
    """Label values come from the closed sets (outcome, kind, decision, transport,
    status), histogram bounds, or registered type names -- never an engine id."""
    text = Client().get("/metrics").content.decode()
    weft = [(n, ls) for n, ls, _ in samples(text) if n.startswith("weft_")]
    assert weft
    for name, labels in weft:
        for key, value in labels.items():
            if name == "weft_schedule_ticks_total":  # its own closed outcome set
                assert key == "outcome" and value in TICK_OUTCOMES, (name, key, value)
                continue
            assert label_value_is_closed(key, value) or type_label_is_bounded(key, value), (
                name,
                key,
                value,
            )


def test_warnings_carry_only_the_workflow_id(scenario: dict[str, Any]) -> None:
    """Each warning's fields are exactly its declared ones; its text and fields name
    the workflow id and nothing else of the workflow (no payload, result, token)."""
    caught: list[WeftWarning] = scenario["warnings"]
    kinds = {(type(w).__name__, w.workflow_id) for w in caught if hasattr(w, "workflow_id")}
    # A cancel (fenced write) and a suspend (renewal) are rotations: no claim-lost warning.
    assert ("WeftWorkflowClaimLostWarning", WIDS["deposed"]) not in kinds
    assert ("WeftWorkflowClaimLostWarning", WIDS["renewal"]) not in kinds
    assert ("WeftWorkflowWakeDiscardedWarning", WIDS["renewal"]) in kinds
    secrets = [PAYLOAD, SIGNAL_PAYLOAD, RESULT, wf.FAIL_MESSAGE, scenario["token"]]
    for warning in caught:
        fields = warning.fields()
        assert set(fields) == set(type(warning)._fields)
        assert all(isinstance(v, str) for v in fields.values()), fields
        if "wake_kind" in fields:
            assert fields["wake_kind"] in WAKE_KINDS
        text = str(warning) + repr(vars(warning))
        for secret in secrets:
            assert secret not in text, (warning, secret)
        others = [w for w in WIDS.values() if w != getattr(warning, "workflow_id", None)]
        assert not [w for w in others if w in text], warning


def test_warning_log_records_carry_only_allowed_fields(scenario: dict[str, Any]) -> None:
    """The structured ``record.weft`` of every ownership warning: allowed keys,
    scalar values, and no value but ``workflow_id`` mentions any workflow."""
    structured = [r for r in scenario["records"] if hasattr(r, "weft")]
    # Warnings shown once per process (an abandoned activity thread) appear here
    # only when no earlier test of this process showed them: check them when
    # present, count only the ownership ones.
    assert len([r for r in structured if r.name == "weft_django.ownership"]) >= 3
    for record in structured:
        assert record.name.startswith("weft_django."), record.name
        payload: dict[str, Any] = record.weft  # type: ignore[attr-defined]
        assert set(payload) <= ALLOWED_LOG_FIELDS, set(payload) - ALLOWED_LOG_FIELDS
        if record.name == "weft_django.ownership":
            assert payload["workflow_id"] in WIDS.values()
        for key, value in payload.items():
            assert value is None or isinstance(value, str | int), (key, value)
            if key != "workflow_id":
                for canary in _canaries(scenario["token"]):
                    if key == "error_message" and canary == wf.FAIL_MESSAGE:
                        continue  # the activity's own exception text, logged to act on
                    assert canary not in str(value), (key, value)
    secrets = [PAYLOAD, SIGNAL_PAYLOAD, RESULT, scenario["token"]]
    for record in scenario["records"]:  # every weft_django record, at DEBUG
        text = record.getMessage() + repr(getattr(record, "weft", ""))
        for secret in secrets:
            assert secret not in text, (record.name, record.getMessage())


def test_warning_classes_declare_no_payload_fields() -> None:
    """The declared fields of every warning class: ids and closed sets only."""
    declared = {name for cls in WARNING_CLASSES for name in cls._fields}
    # ``activity``: an activity's registered name (code, not data); ``alias``:
    # a database alias from settings (configuration, not data); ``schedule_id``:
    # an id like a workflow id (a schedule removed from WEFT["SCHEDULES"]).
    assert declared == {
        "workflow_id",
        "wake_kind",
        "holder_id",
        "reason",
        "activity",
        "alias",
        "schedule_id",
    }


def test_every_warn_call_passes_only_allowed_fields() -> None:
    """Static check of every ``warn_*`` call in weft_django (including paths this
    battery does not drive, e.g. the Celery node): allowed keywords, no ``**``."""
    root = Path(__import__("weft_django").__file__).parent
    calls = 0
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name not in WARN_HELPERS or path.name == "warnings.py":
                continue
            calls += 1
            where = f"{path.relative_to(root)}:{node.lineno}"
            assert len(node.args) <= 2, where
            keywords = {k.arg for k in node.keywords}
            assert None not in keywords, f"{where}: **kwargs could carry anything"
            assert keywords <= ALLOWED_LOG_FIELDS, (where, keywords - ALLOWED_LOG_FIELDS)
    assert calls >= 5, calls
