"""The whole ``/metrics`` exposition passes ``promtool check metrics``.

Why the whole output and not named metrics: a scraper rejects or mislabels
a target on any malformed line, and promtool's lint (names, suffixes, help
text, label names) is what a Prometheus operator runs. The store is
populated first so the weft samples carry real labels and values.

promtool comes from Debian's ``prometheus`` package; ``scripts/test``
installs it and sets ``WEFT_REQUIRE_PROMTOOL=1``, so there a missing
promtool fails the test. Elsewhere the test falls back to
prometheus_client's own parser, which at least rejects what a scraper
cannot read.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.inspect.conftest import Populated


def _exposition() -> str:
    response = Client().get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert any(line.startswith("weft_") for line in text.splitlines()), text[:500]
    return text


def _promtool() -> str | None:
    promtool = shutil.which("promtool")
    if promtool is None and os.environ.get("WEFT_REQUIRE_PROMTOOL") == "1":
        pytest.fail("WEFT_REQUIRE_PROMTOOL=1, but promtool is missing: apt-get install prometheus")
    return promtool


def test_metrics_pass_promtool_check(populated: Populated) -> None:
    text = _exposition()
    promtool = _promtool()
    if promtool is not None:
        result = subprocess.run(
            [promtool, "check", "metrics"],
            input=text,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (result.returncode, result.stdout + result.stderr) == (0, "")
    families = list(text_string_to_metric_families(text))
    weft = [family for family in families if family.name.startswith("weft_")]
    assert weft and all(family.documentation for family in weft)


def test_the_check_rejects_a_broken_exposition() -> None:
    # The same command on a known-bad exposition: the test above could fail.
    broken = '# TYPE weft_bad counter\nweft_bad{a="1"} 1\nweft_bad{a="1"} not-a-number\n'
    promtool = _promtool()
    if promtool is not None:
        result = subprocess.run(
            [promtool, "check", "metrics"], input=broken, capture_output=True, text=True, timeout=60
        )
        assert result.returncode != 0
    with pytest.raises(ValueError):
        list(text_string_to_metric_families(broken))
