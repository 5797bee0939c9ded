"""Moved to ``weft_django.transports.celery`` (``identity``, ``node``, ``pool``,
``routing``, ``messages``, ``timers``, ``turn_marks``); kept for imports."""

from __future__ import annotations

from typing import Any

from weft_django.transports.celery.identity import (
    ENV_KEY,
    NodeIdentity,
    identity,
    pool_name,
    prepare_node,
)
from weft_django.transports.celery.messages import DriveMessage, send_pickup
from weft_django.transports.celery.messages import send_drive as _send
from weft_django.transports.celery.node import NodeEngine, NodeRuntime, shutdown_node, start_node
from weft_django.transports.celery.pool import pool_engine, run_drive, run_pickup
from weft_django.transports.celery.routing import Owner, owner_of_run
from weft_django.transports.celery.timers import dispatch_timers


def send_drive(
    node_name: str, run_id: str, wake_kind: str | None, engine_id: str, epoch: int, **options: Any
) -> bool:
    """The old positional form of ``messages.send_drive(DriveMessage(...))``."""
    return _send(DriveMessage(node_name, str(run_id), wake_kind, engine_id, int(epoch), **options))


facade = pool_engine

__all__ = [
    "ENV_KEY",
    "NodeEngine",
    "NodeIdentity",
    "NodeRuntime",
    "Owner",
    "dispatch_timers",
    "facade",
    "identity",
    "owner_of_run",
    "pool_engine",
    "pool_name",
    "prepare_node",
    "run_drive",
    "run_pickup",
    "send_drive",
    "send_pickup",
    "shutdown_node",
    "start_node",
]
