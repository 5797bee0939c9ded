"""One activity attempt, end to end: the executor and its threads, event loop and watchdog,
the attempt they share, ``activity_info()`` and durable heartbeats, atomic activities, and
routed (Celery-queued) ones with their dispatcher registry; an attempt a turn started and
has not committed (``pending``) and the log line of a failed attempt or run (``attempt_log``).
This package imports nothing: ``routed_dispatch`` is imported from a project's
``celery.py`` while settings still load.
"""
