"""The subcommands of ``manage.py weft``: one module each.

Why a package beside ``commands/``: Django loads every module of
``management/commands`` as a command of its own, and ``weft`` is one command
with subcommands (``start``, ``signal``, ``list``, ``show``, ``cancel``,
``retry``, ``resume``, ``result``). Each module here declares one
``Subcommand`` (its arguments and what it does); ``console`` turns what it
returns into text or one JSON document and every error into a stable code
and exit status; ``args`` parses the values the user typed (JSON, filter
flags) before anything is written.

Invariant: a subcommand writes only through ``weft_django.client``;
the read-only ones (``list``, ``show``) read rows and the runtime's
read-only views (``engine.run_waits``).
"""

from __future__ import annotations

from .console import Console, Subcommand

__all__ = ["Console", "Subcommand"]
