"""The maintenance pass: what an engine finds to do besides the turns it is told of.

``passes`` composes the pass; ``reclaim`` takes over runs whose owner is gone (a gone
engine's claims in one batch: ``bulk_takeover``), ``pickup`` and ``admission`` start
pending runs (ordinary and queued).
"""

#: Rows one pass reads or writes per kind of work: bounds a pass's statements
#: and locks whatever the backlog.
BATCH = 100
