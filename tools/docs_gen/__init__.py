"""Generate the reference pages in ``docs/reference/`` from the code.

Why generated: the settings, errors, warnings, metrics, API routes and
management commands are contracts, and prose copies of them drift. Each page
is rendered from the objects themselves (``conf.DEFAULTS`` and
``DESCRIPTIONS``, ``errors.ERROR_CLASSES``, ``warnings.WARNING_CLASSES``, the
metric exporters, drf-spectacular's OpenAPI generator, the command parsers),
one renderer per page (``*_page.py``), and ``tests/unit/test_docs_sync.py``
fails when a committed page differs from a fresh rendering.

Why outside ``weft_django``: it is developer tooling; the wheel does not
ship it. Usage, from the repository root (the example project's settings
provide the API's DRF configuration; the ``api`` and ``metrics`` extras must
be installed)::

    python -m tools.docs_gen            # rewrite docs/reference/*.md
    python -m tools.docs_gen --check    # exit 1 if a page is stale

The pages are written next to this repository's ``docs/`` whatever the
current directory (``--out`` to write elsewhere). Rendering never touches
the database.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .api_page import api_schema, render_api
from .commands_page import render_commands, weft_command_names
from .errors_page import render_errors
from .metrics_page import collector_metric_names, engine_metric_names, render_metrics
from .settings_page import render_settings
from .warnings_page import render_warnings

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "docs" / "reference"
"""``docs/reference`` of the repository this tool sits in."""

PAGES: dict[str, Callable[[], str]] = {
    "settings.md": render_settings,
    "errors.md": render_errors,
    "warnings.md": render_warnings,
    "metrics.md": render_metrics,
    "api.md": render_api,
    "commands.md": render_commands,
}
"""File name in ``docs/reference/`` -> its renderer."""


def render_all() -> dict[str, str]:
    """Every reference page, rendered."""
    return {name: render() for name, render in PAGES.items()}


def stale_pages(out_dir: Path = DEFAULT_OUT) -> list[str]:
    """The pages whose committed file differs from a fresh rendering."""
    return [
        name
        for name, text in render_all().items()
        if not (out_dir / name).is_file() or (out_dir / name).read_text() != text
    ]


def write_pages(out_dir: Path = DEFAULT_OUT) -> list[str]:
    """(Re)write every page; returns the names that changed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in render_all().items():
        target = out_dir / name
        if not target.is_file() or target.read_text() != text:
            target.write_text(text)
            changed.append(name)
    return changed


__all__ = [
    "DEFAULT_OUT",
    "PAGES",
    "api_schema",
    "collector_metric_names",
    "engine_metric_names",
    "render_all",
    "stale_pages",
    "weft_command_names",
    "write_pages",
]
