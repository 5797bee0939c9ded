"""Child programs that tests start as real OS processes (``python -m tests.procs.X``)."""
