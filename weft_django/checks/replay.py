"""The deploy gate as a Django system check: ``manage.py check --deploy`` (``weft.W050``).

Why a deploy-tagged check: it reads the database (every other weft check
refuses to), so it must never run on ``runserver`` or ``migrate``; Django
runs ``deploy=True`` checks only under ``check --deploy``, which a release
pipeline already calls with the new code and the production settings.

It replays a bounded sample -- ``WEFT["REPLAY_CHECK_SAMPLE"]`` live runs,
spread over every live workflow name (``engine.replay_check``) -- read-only;
``manage.py weft_replay_check`` is the exhaustive version. Each finding is a
``weft.W050`` warning (``--fail-level WARNING`` makes them fail the
pipeline). A database that cannot be read (unreachable, not migrated) never
makes the check raise: it is one ``weft.W051`` warning saying the gate did
not run. Tagged ``weft_replay`` as well, so a pipeline can run the gate alone
(``check --deploy --tag weft_replay --fail-level WARNING``).
"""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

from weft_django.conf import get_settings
from weft_django.engine.replay.check import Finding, sample_live_runs

#: Findings shown one message each; the rest are counted in one more message.
SHOWN_FINDINGS = 20


def check_live_runs_replay(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    try:
        sample = get_settings().replay_check_sample
    except ImproperlyConfigured:
        return []  # check_weft_settings reports the settings themselves
    try:
        report = sample_live_runs(sample)
    except DatabaseError as exc:
        return [
            checks.Warning(
                f"the weft replay check did not run: the database could not be read ({exc})",
                hint="Run `manage.py weft_replay_check` where the database is reachable "
                "and migrated.",
                id="weft.W051",
            )
        ]
    messages: list[checks.CheckMessage] = [
        _message(finding) for finding in report.failures[:SHOWN_FINDINGS]
    ]
    hidden = len(report.failures) - SHOWN_FINDINGS
    if hidden > 0:
        messages.append(
            checks.Warning(
                f"{hidden} more live run(s) or workflow name(s) would break under this code",
                hint="`manage.py weft_replay_check` lists every one.",
                id="weft.W050",
            )
        )
    return messages


def _message(finding: Finding) -> checks.CheckMessage:
    if finding.kind == "unknown-workflow":
        hint = "Keep the @workflow of that name until its live runs finish."
        text = finding.message
    else:
        text = f"a live run of {finding.workflow!r} would break under this code: {finding.message}"
        hint = (
            f"Run {finding.run_id} ({finding.workflow_id!r}, {finding.status}) would be "
            "suspended at its next turn; guard the change with ctx.patched(...) "
            "(docs/howto/deploy-checklist.md)."
        )
    return checks.Warning(text, hint=hint, id="weft.W050")
