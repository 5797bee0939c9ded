"""Imported (``-I``) by the Celery processes of ``test_tracing_celery.py``:
an OpenTelemetry SDK provider that appends every span, as a JSON line, to
the file ``WEFT_TEST_SPANS_FILE`` names (``tests.tracing_support``)."""

from __future__ import annotations

from tests.tracing_support import install_file_exporter

install_file_exporter()
