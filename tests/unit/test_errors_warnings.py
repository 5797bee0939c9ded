"""Errors and warnings (SPEC §4.8): stable codes, fields, messages, reporting."""

from __future__ import annotations

import copy
import inspect
import json
import logging
import pickle
import re
import warnings
from typing import Any

import pytest

from weft_django import errors as errors_module
from weft_django import warnings as warnings_module
from weft_django.errors import (
    ERROR_CLASSES,
    ActivityError,
    AsyncActivityTokenError,
    EngineDeposedError,
    OwnershipModeMismatchError,
    PayloadError,
    WeftError,
    WorkflowClaimUnavailableError,
)
from weft_django.warnings import (
    WAKE_KINDS,
    WARNING_CLASSES,
    WeftActivityAbandonedWarning,
    WeftAtomicOtherAliasWarning,
    WeftLeaseLostWarning,
    WeftScheduleRemovedWarning,
    WeftWarning,
    WeftWorkflowClaimLostWarning,
    WeftWorkflowWakeDiscardedWarning,
    warn_activity_abandoned,
    warn_claim_lost,
    warn_lease_lost,
    warn_wake_discarded,
)

# One instance of every error, with distinctive values so messages can be checked.
SAMPLES: dict[type[WeftError], dict[str, Any]] = dict(
    [
        (WorkflowClaimUnavailableError, {"workflow_id": "wf-1", "held_by": "engine-b"}),
        (
            OwnershipModeMismatchError,
            {
                "configured_mode": "lease",
                "stored_mode": "workflow-lease",
                "established_at": 1_700_000_000_000,
            },
        ),
        (EngineDeposedError, {"workflow_id": "wf-2"}),
        (errors_module.EngineLeaseAcquisitionTimeoutError, {"waited_ms": 1234, "held_by": "e-9"}),
        (errors_module.EngineLeaseCorruptedError, {"detail": "holder undecodable"}),
        (errors_module.WorkflowNotFound, {"workflow_id": "wf-3"}),
        (errors_module.UnknownWorkflowType, {"name": "ship_order"}),
        (errors_module.WorkflowAlreadyRunning, {"workflow_id": "wf-4", "run_id": "r-77"}),
        (
            errors_module.IdempotencyConflictError,
            {"idempotency_key": "k-1", "existing_name": "alpha", "requested_name": "beta"},
        ),
        (
            errors_module.InvalidTransitionError,
            {"workflow_id": "wf-5", "status": "completed", "action": "retry"},
        ),
        (AsyncActivityTokenError, {"kind": "used"}),
        (
            errors_module.NonDeterminismError,
            {"workflow_id": "wf-6", "position": 3, "recorded": "sleep(5)", "new": "activity(x)"},
        ),
        (
            errors_module.PayloadTypeMismatch,
            {
                "workflow_id": "wf-6b",
                "position": 4,
                "recorded": "the result of activity charge",
                "new": "total: missing",
            },
        ),
        (
            ActivityError,
            {
                "activity": "charge_card",
                "message": "card declined",
                "kind": "timeout",
                "error_type": "GatewayError",
                "attempts": 3,
            },
        ),
        (
            errors_module.ChildWorkflowError,
            {"workflow_id": "wf-7", "status": "failed", "error": {"type": "KeyError"}},
        ),
        (
            errors_module.CrashLoopError,
            {"workflow_id": "wf-poison", "position": 3, "attempts": 5, "engines": ("e1", "e2")},
        ),
        (errors_module.WorkflowTimeoutError, {"workflow_id": "wf-8", "what": "signal approve"}),
        (
            errors_module.WorkflowFinishedError,
            {"workflow_id": "wf-12", "status": "completed", "what": "setting event 'url'"},
        ),
        (
            errors_module.InvalidRunFilter,
            {"key": "attr", "value": "amount=ten", "reason": "not an integer"},
        ),
        (
            errors_module.UnknownQuery,
            {"workflow_id": "wf-16", "name": "progres", "registered": ["progress"]},
        ),
        (
            errors_module.InvalidArgumentError,
            {"argument": "priority", "reason": "priority must be an integer, got 'high'"},
        ),
        (
            errors_module.WorkflowFailedError,
            {"workflow_id": "wf-9", "status": "cancelled", "error": {"message": "stop"}},
        ),
        (errors_module.NotLocallyOwned, {"workflow_id": "wf-10", "held_by": "engine-c"}),
        (PayloadError, {"what": "workflow input", "reason": "not JSON serialisable"}),
        (errors_module.ActivityCancelled, {"workflow_id": "wf-11", "reason": "claim lost"}),
        (
            errors_module.StaleFenceError,
            {
                "model": "demo.FencedAccount",
                "pk": 7,
                "workflow_id": "wf-12",
                "epoch": 3,
                "stored_epoch": 4,
            },
        ),
        (errors_module.WorkflowCancelled, {"workflow_id": "wf-12", "reason": "customer asked"}),
        (
            errors_module.SagaCompensationError,
            {
                "workflow_id": "wf-13",
                "outcomes": [
                    {"compensation": "refund", "status": "failed", "error": "gateway down"},
                    {"compensation": "release_stock", "status": "ok", "error": None},
                ],
            },
        ),
        (errors_module.ScheduleNotFound, {"schedule_id": "nightly-14"}),
        (errors_module.ScheduleAlreadyExists, {"schedule_id": "nightly-15"}),
        (
            errors_module.UpdateRejected,
            {"workflow_id": "wf-14", "name": "add", "reason": "item must be a string"},
        ),
        (
            errors_module.UnknownUpdate,
            {"workflow_id": "wf-15", "name": "nope", "registered": ["add"]},
        ),
    ]
)


def make(cls: type[WeftError]) -> WeftError:
    return cls(**SAMPLES[cls])


def test_every_public_error_class_is_listed_and_sampled() -> None:
    public = {
        obj
        for name, obj in vars(errors_module).items()
        if inspect.isclass(obj) and issubclass(obj, WeftError) and obj is not WeftError
    }
    assert set(ERROR_CLASSES) == public
    assert len(ERROR_CLASSES) == len(set(ERROR_CLASSES)) == 32
    assert set(SAMPLES) == public
    assert set(errors_module.__all__) >= {c.__name__ for c in public}


def test_codes_are_unique_stable_snake_case() -> None:
    codes = [cls.code for cls in ERROR_CLASSES]
    assert len(set(codes)) == len(codes)
    assert WeftError.code not in codes
    for code in codes:
        assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", code), code
    assert errors_module.WorkflowNotFound.code == "workflow_not_found"


@pytest.mark.parametrize(
    ("cls", "status"),
    [
        (WorkflowClaimUnavailableError, 409),
        (OwnershipModeMismatchError, 409),
        (EngineDeposedError, 409),
        (errors_module.EngineLeaseAcquisitionTimeoutError, 503),
        (errors_module.EngineLeaseCorruptedError, 500),
        (errors_module.WorkflowNotFound, 404),
        (errors_module.UnknownWorkflowType, 400),
        (errors_module.WorkflowAlreadyRunning, 409),
        (errors_module.IdempotencyConflictError, 409),
        (errors_module.InvalidTransitionError, 409),
        (errors_module.NonDeterminismError, 409),
        (errors_module.PayloadTypeMismatch, 409),
        (ActivityError, 500),
        (errors_module.ChildWorkflowError, 500),
        (errors_module.CrashLoopError, 409),
        (errors_module.WorkflowTimeoutError, 504),
        (errors_module.WorkflowFailedError, 500),
        (errors_module.NotLocallyOwned, 409),
        (PayloadError, 400),
        (errors_module.ActivityCancelled, 409),
        (errors_module.StaleFenceError, 409),
        (errors_module.WorkflowCancelled, 409),
        (errors_module.SagaCompensationError, 500),
        (errors_module.ScheduleNotFound, 404),
        (errors_module.ScheduleAlreadyExists, 409),
        (errors_module.UpdateRejected, 422),
        (errors_module.UnknownUpdate, 404),
        (errors_module.WorkflowFinishedError, 409),
        (errors_module.InvalidRunFilter, 400),
        (errors_module.InvalidArgumentError, 400),
        (errors_module.UnknownQuery, 400),
    ],
)
def test_http_status(cls: type[WeftError], status: int) -> None:
    assert cls.http_status == status
    assert make(cls).http_status == status


def test_async_token_status_depends_on_kind() -> None:
    assert AsyncActivityTokenError("unknown").http_status == 404
    assert AsyncActivityTokenError("used").http_status == 409
    assert AsyncActivityTokenError("used").as_dict()["kind"] == "used"


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_fields_message_as_dict_and_pickle(cls: type[WeftError]) -> None:
    kwargs = SAMPLES[cls]
    err = cls(**kwargs)
    assert isinstance(err, WeftError) and isinstance(err, Exception)
    for name, value in kwargs.items():
        assert getattr(err, name) == value
    message = str(err)
    # The message names every string / int value it was built from (a ``kind``
    # literal is rendered as words, e.g. "timed out", so it is not looked for).
    for name, value in kwargs.items():
        if name != "kind" and isinstance(value, str | int) and not isinstance(value, bool):
            assert str(value) in message, (name, value, message)
    body = err.as_dict()
    assert body["code"] == cls.code
    assert body["message"] == message
    for name, value in kwargs.items():
        key = "error_message" if (cls is ActivityError and name == "message") else name
        assert body[key] == value
    assert set(body) == {"code", "message"} | {
        "error_message" if (cls is ActivityError and n == "message") else n for n in kwargs
    }
    json.dumps(body)  # the API can serve it as-is
    for clone in (pickle.loads(pickle.dumps(err)), copy.copy(err)):
        assert type(clone) is cls
        assert str(clone) == message
        assert clone.as_dict() == body


def test_mode_mismatch_message_tells_the_operator_what_to_do() -> None:
    text = str(make(OwnershipModeMismatchError))
    assert "'lease'" in text and "'workflow-lease'" in text
    assert "2023-11-14T22:13:20Z" in text
    assert "stop every engine" in text
    assert "restart them all" in text
    assert "weft_reset_mode" in text and "no engine is alive" in text
    # An absurd timestamp still gives a message, not an exception.
    assert "99999999999999999999 ms" in str(
        OwnershipModeMismatchError("lease", "workflow-lease", 99999999999999999999)
    )


def test_optional_fields() -> None:
    assert EngineDeposedError().workflow_id is None
    assert "ownership lease" in str(EngineDeposedError())
    assert '"wf-2"' in str(EngineDeposedError("wf-2"))
    assert errors_module.WorkflowAlreadyRunning("wf").run_id is None
    assert WorkflowClaimUnavailableError("wf", None).as_dict()["held_by"] is None
    err = ActivityError("a", "boom")
    assert (err.kind, err.error_type, err.attempts) == ("error", None, 1)


def test_payload_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="Invalid signal payload: too large"):
        raise PayloadError("signal payload", "too large")


# -------------------------------------------------------------------- warnings


def test_warning_classes() -> None:
    assert (
        WeftWorkflowClaimLostWarning,
        WeftWorkflowWakeDiscardedWarning,
        WeftLeaseLostWarning,
        WeftActivityAbandonedWarning,
        WeftAtomicOtherAliasWarning,
        WeftScheduleRemovedWarning,
    ) == WARNING_CLASSES
    for cls in WARNING_CLASSES:
        assert issubclass(cls, WeftWarning) and issubclass(cls, RuntimeWarning)
    assert len(WAKE_KINDS) == 6 and WAKE_KINDS[-1] == "drive"
    assert set(warnings_module.__all__) >= {c.__name__ for c in WARNING_CLASSES}


def _only_record(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    records = [r for r in caplog.records if r.name == "weft_django.ownership"]
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING
    return records[0]


def test_warn_claim_lost(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="weft_django.ownership")
    with pytest.warns(WeftWorkflowClaimLostWarning, match='workflow "wf-1" lost') as rec:
        returned = warn_claim_lost("wf-1", engine_id="engine-a", epoch=4)
    assert len(rec) == 1
    w = rec[0]
    assert w.message is returned
    assert isinstance(w.message, WeftWorkflowClaimLostWarning)
    assert w.message.workflow_id == "wf-1"
    assert w.filename == __file__  # attributed to the caller, not to warnings.py
    record = _only_record(caplog)
    assert record.getMessage() == str(returned)
    weft = record.__dict__["weft"]
    assert weft == {
        "engine_id": "engine-a",
        "epoch": 4,
        "workflow_id": "wf-1",
        "event": "workflow_claim_lost",
    }


@pytest.mark.parametrize("kind", WAKE_KINDS)
def test_warn_wake_discarded(kind: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="weft_django.ownership")
    with pytest.warns(WeftWorkflowWakeDiscardedWarning) as rec:
        warn_wake_discarded("wf-2", kind, reason="generation-mismatch", observed_epoch=9)
    w = rec[0].message
    assert isinstance(w, WeftWorkflowWakeDiscardedWarning)
    assert (w.workflow_id, w.wake_kind) == ("wf-2", kind)
    assert f'"{kind}"' in str(w) and '"wf-2"' in str(w)
    assert rec[0].filename == __file__
    weft = _only_record(caplog).__dict__["weft"]
    assert weft == {
        "reason": "generation-mismatch",
        "observed_epoch": 9,
        "workflow_id": "wf-2",
        "wake_kind": kind,
        "event": "workflow_wake_discarded",
    }


@pytest.mark.parametrize(
    ("reason", "phrase"), [("deposed", "halting"), ("renewal-unconfirmable", "retries")]
)
def test_warn_lease_lost(reason: Any, phrase: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="weft_django.ownership")
    with pytest.warns(WeftLeaseLostWarning, match=phrase) as rec:
        warn_lease_lost("engine-z", reason, epoch=3)
    w = rec[0].message
    assert isinstance(w, WeftLeaseLostWarning)
    assert (w.holder_id, w.reason) == ("engine-z", reason)
    weft = _only_record(caplog).__dict__["weft"]
    assert weft == {"epoch": 3, "holder_id": "engine-z", "reason": reason, "event": "lease_lost"}


def test_warn_activity_abandoned_logs_on_the_engine_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="weft_django.engine")
    with pytest.warns(WeftActivityAbandonedWarning, match="cannot be stopped") as rec:
        warn_activity_abandoned("charge_card", "timed out after 50 ms", workflow_id="wf-9")
    w = rec[0].message
    assert isinstance(w, WeftActivityAbandonedWarning)
    assert (w.activity, w.reason) == ("charge_card", "timed out after 50 ms")
    assert '"charge_card"' in str(w) and "keeps running" in str(w)
    assert rec[0].filename == __file__
    [record] = [r for r in caplog.records if r.name == "weft_django.engine"]
    assert record.levelno == logging.WARNING
    assert record.__dict__["weft"] == {
        "workflow_id": "wf-9",
        "activity": "charge_card",
        "reason": "timed out after 50 ms",
        "event": "activity_abandoned",
    }


def test_own_fields_win_over_extra_fields(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="weft_django.ownership")
    with pytest.warns(WeftWorkflowClaimLostWarning):
        warn_claim_lost("wf-real", **{"event": "spoofed", "workflow_id_extra": 1})
    weft = _only_record(caplog).__dict__["weft"]
    assert weft["event"] == "workflow_claim_lost"
    assert weft["workflow_id"] == "wf-real"


def test_warnings_become_errors_under_w_error_and_can_be_filtered() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", WeftWarning)
        with pytest.raises(WeftWorkflowClaimLostWarning) as info:
            warn_claim_lost("wf-3")
        assert info.value.workflow_id == "wf-3"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=WeftWarning)
        warn_wake_discarded("wf-3", "sleep")
    assert seen == []


@pytest.mark.parametrize(
    "instance",
    [
        WeftWorkflowClaimLostWarning("wf"),
        WeftWorkflowWakeDiscardedWarning("wf", "signal"),
        WeftLeaseLostWarning("engine-a", "renewal-unconfirmable"),
        WeftActivityAbandonedWarning("charge_card", "timed out after 50 ms"),
        WeftAtomicOtherAliasWarning("reserve_stock", "analytics"),
        WeftScheduleRemovedWarning("nightly"),
    ],
    ids=lambda w: type(w).__name__,
)
def test_warnings_pickle_with_fields(instance: WeftWarning) -> None:
    clone = pickle.loads(pickle.dumps(instance))
    assert type(clone) is type(instance)
    assert clone.fields() == instance.fields()
    assert str(clone) == str(instance)
