"""``python -m tests.procs.replay_history_child MODULES HISTORY``: replay an
exported history in a fresh process, on whatever ``DATABASE_URL`` names, and
print what happened as one JSON object on stdout.

The database is migrated first (a fresh SQLite file), then its file's bytes
and every weft table's row count are taken before and after the replay:
``{"result": ..., "error": ..., "rows_before": ..., "rows_after": ...,
"file_unchanged": bool}``. ``MODULES``: comma-separated workflow modules to
import (the code the history is replayed against).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any


def _file_digest(name: str) -> str:
    return hashlib.sha256(Path(name).read_bytes()).hexdigest()


def _rows() -> dict[str, int]:
    from django.apps import apps

    return {
        model.__name__: model.objects.count() for model in apps.get_app_config("weft").get_models()
    }


def main(argv: list[str]) -> None:
    modules, history = argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    for name in filter(None, modules.split(",")):
        importlib.import_module(name)
    from weft_django.errors import NonDeterminismError
    from weft_django.testing import replay_history

    db_file = str(connection.settings_dict["NAME"])
    out: dict[str, Any] = {"vendor": connection.vendor, "rows_before": _rows()}
    connection.close()
    digest = _file_digest(db_file)
    try:
        out["result"] = replay_history(history)
    except NonDeterminismError as exc:
        out["error"] = {"position": exc.position, "recorded": exc.recorded, "new": exc.new}
    connection.close()
    out["file_unchanged"] = _file_digest(db_file) == digest
    out["rows_after"] = _rows()
    sys.stdout.write(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
