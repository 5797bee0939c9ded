"""``python -m benchmarks.tasksdb_peer <command> ...``: manage.py of the peer project."""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.tasksdb_peer.settings"
    from django.core.management import execute_from_command_line

    execute_from_command_line(["tasksdb_peer", *sys.argv[1:]])
