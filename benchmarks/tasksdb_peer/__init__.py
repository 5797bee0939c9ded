"""The django-tasks-db peer of ``python -m benchmarks tasks`` (run in ``benchmarks/.venv-tasksdb``).

NOT imported by the project: it runs under the benchmark's own virtual
environment (``python3.11 -m venv benchmarks/.venv-tasksdb &&
benchmarks/.venv-tasksdb/bin/pip install "Django>=5.2,<5.3" django-tasks-db
"psycopg[binary]"``); django-tasks-db is no dependency of weft-django. A
minimal Django project (``settings``) with ``django_tasks_db``'s
``DatabaseBackend`` as the ``default`` task backend and the same trivial task
as ``benchmarks/task_defs.py`` (``tasks.noop``). ``python -m
benchmarks.tasksdb_peer <manage.py arguments>``: ``migrate``, ``db_worker``,
and ``bench_enqueue N`` (enqueue N tasks one by one, each committed, as fast as
it can).
"""
