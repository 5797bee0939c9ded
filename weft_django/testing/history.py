"""``replay_history``: run an exported history against the code in this process.

The laptop half of ``manage.py weft history export``: the body replays in
the calling thread (a breakpoint in it stops there, under any debugger)
over the recorded journal, through the deploy gate's own replay
(``engine.replay.offline``).

Invariant: **no database access at all**, writes or reads. The history is
read from its file (or taken as a dict) and verified first; the replay runs
with every connection's queries refused, so it works on a laptop with an
empty or absent database and can never change one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from weft_django.engine.replay.events import Failed, Finished
from weft_django.engine.replay.history import history_events, load_history
from weft_django.engine.replay.offline import divergence, replay_journal
from weft_django.engine.workflow.definitions import WorkflowDefinition, get_workflow
from weft_django.errors import WorkflowFailedError

HistorySource = str | os.PathLike[str] | Mapping[str, Any]


def replay_history(
    path_or_dict: HistorySource, workflow: str | Callable[..., Any] | None = None
) -> Any:
    """Replay the history at ``path_or_dict`` against this code; its result.

    ``workflow``: the body to replay -- ``None`` for the workflow the history
    names (as registered in this process), another registered name, or a
    function (an edited body, registered or not) run under the history's name.

    Returns what the body returns once the whole journal replayed (the recorded
    result, when the code is unchanged); a run that had not ended, or that
    continued as new, returns ``None`` after its journal replayed cleanly.
    Raises ``NonDeterminismError`` (position, recorded and new command) when
    the code diverges from the journal, ``WorkflowFailedError`` when the body
    fails as the recorded run did, ``HistoryFormatError`` for a file of
    another version, truncated or edited, ``UnknownWorkflowType`` for a name
    this process does not register.
    """
    document = load_history(path_or_dict)
    definition = _definition(document["workflow"]["name"], workflow)
    run = document["run"]
    replay, outcome = replay_journal(
        definition,
        workflow_id=str(run["workflow_id"]),
        run_id=str(run["run_id"]),
        input=run["input"],
        events=history_events(document),
    )
    error = divergence(replay, outcome)
    if error is not None:
        raise error
    if isinstance(outcome, Finished):
        return outcome.result
    if isinstance(outcome, Failed):
        raise WorkflowFailedError(str(run["workflow_id"]), "failed", outcome.error)
    return None  # continued as new, or the frontier of a run that had not ended


def _definition(name: str, workflow: str | Callable[..., Any] | None) -> WorkflowDefinition:
    if workflow is None:
        return get_workflow(name)
    if isinstance(workflow, str):
        return get_workflow(workflow)
    if not callable(workflow):
        raise TypeError(
            f"workflow must be a workflow name or a function, got {type(workflow).__name__}: "
            f"{workflow!r:.100}"
        )
    return WorkflowDefinition(name, workflow)


__all__ = ["HistorySource", "replay_history"]
