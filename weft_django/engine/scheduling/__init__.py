"""Where an engine's work runs: the ``TurnScheduler`` seam and the default
``LocalScheduler``, the background side tasks (renewal, polling), the maintenance cadence
and the presence watch. They decide where and when work runs, never whether: every turn
still goes through the wake guard and the fenced commit (the ``turn`` wing's).
"""
