"""Flow control: a start's queue fields, the gate of a queued run's turn, re-admission after
a takeover and what a waiting run waits for. Admission itself is the maintenance pass's
(``engine.maintenance.admission``); the limits are parsed in ``kernel.queue_spec``.
"""
