"""Django signals for application hooks (SPEC §5).

``workflow_started(run)`` when an engine picks a run up; ``workflow_completed
(run, result)`` and ``workflow_failed(run, error)`` after the terminal commit.
Receivers run in the engine process, after the commit, outside any lock.
"""

from django.dispatch import Signal

workflow_started = Signal()
workflow_completed = Signal()
workflow_failed = Signal()
