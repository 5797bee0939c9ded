"""The docs cannot drift from the code (SPEC §8: "a test keeps the settings,
errors, metrics and endpoints in the docs in step with the code").

Two layers:

* every page of ``docs/reference/`` must equal a fresh rendering by
  ``tools/docs_gen`` (run ``python -m tools.docs_gen`` after
  changing the code);
* independently of the generator, every name the code defines must appear
  in the docs: each ``WEFT`` key (reference and README's settings table),
  error class and code (reference and README's errors table), warning class,
  metric name (taken from ``to_prometheus_text`` and from what the cluster
  collector actually serves), API route (walking ``weft_django.api.urls``)
  and management command.

Plus: every relative link in README.md and docs/ points at a file that exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.management import get_commands
from django.urls import URLPattern, URLResolver

from tests.support import REPO_ROOT
from tools import docs_gen
from weft_django.conf import DEFAULTS
from weft_django.errors import ERROR_CLASSES
from weft_django.warnings import WARNING_CLASSES

DOCS = REPO_ROOT / "docs"
REFERENCE = DOCS / "reference"
README = REPO_ROOT / "README.md"
REGENERATE = "run `python -m tools.docs_gen` (from the repository root) and commit"


def _read(path: Path) -> str:
    assert path.is_file(), f"{path.relative_to(REPO_ROOT)} is missing"
    return path.read_text()


def _readme_section(title: str) -> str:
    """README's ``## title`` section, up to the next ``## `` heading."""
    text = _read(README)
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def _table_lines(markdown: str) -> str:
    return "\n".join(line for line in markdown.splitlines() if line.startswith("|"))


# --------------------------------------------------------------------------- generated pages


@pytest.mark.parametrize("page", sorted(docs_gen.PAGES))
def test_reference_page_equals_a_fresh_generation(page: str) -> None:
    committed = _read(REFERENCE / page)
    fresh = docs_gen.PAGES[page]()
    assert committed == fresh, f"docs/reference/{page} is stale: {REGENERATE}"


def test_every_generated_page_is_linked_from_the_docs_index() -> None:
    index = _read(DOCS / "README.md")
    for page in docs_gen.PAGES:
        assert f"reference/{page}" in index, page


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize("key", sorted(DEFAULTS))
def test_every_setting_is_documented(key: str) -> None:
    assert f"`{key}`" in _read(REFERENCE / "settings.md")
    assert f"`{key}`" in _table_lines(_readme_section("Settings")), (
        f"README's settings table lacks {key}"
    )


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_is_documented(cls: type) -> None:
    reference = _read(REFERENCE / "errors.md")
    code = cls.code  # type: ignore[attr-defined]
    assert cls.__name__ in reference and f"`{code}`" in reference
    readme_table = _table_lines(_readme_section("Errors"))
    assert f"`{cls.__name__}(" in readme_table and f"`{code}`" in readme_table, (
        f"README's errors table lacks {cls.__name__} / {code}"
    )


@pytest.mark.parametrize("cls", WARNING_CLASSES, ids=lambda c: c.__name__)
def test_every_warning_is_documented(cls: type) -> None:
    assert f"`{cls.__name__}`" in _read(REFERENCE / "warnings.md")
    assert f"`{cls.__name__}`" in _read(README)


def _engine_metric_names() -> set[str]:
    from weft_django.ownership.metrics import ClaimMetrics, to_prometheus_text

    metrics = ClaimMetrics()
    metrics.record_claim_attempt("acquired")
    metrics.record_wake("sleep", "proceed", "polling")
    text = to_prometheus_text(metrics.snapshot())
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def test_every_engine_metric_is_documented() -> None:
    names = _engine_metric_names()
    assert names, "to_prometheus_text emitted no metric"
    reference = _read(REFERENCE / "metrics.md")
    for name in names:
        assert f"`{name}`" in reference, name


@pytest.mark.django_db
def test_every_collector_metric_is_documented() -> None:
    """What the cluster collector serves at a scrape (empty tables), by name."""
    from prometheus_client import CollectorRegistry, generate_latest

    from weft_django.contrib import prometheus

    registry = CollectorRegistry()
    prometheus.register(registry)
    try:
        text = generate_latest(registry).decode()
    finally:
        prometheus.unregister(registry)
    types = dict(line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE "))
    assert "weft_cluster_scrape_ok" in types, text
    reference = _read(REFERENCE / "metrics.md")
    for name, kind in types.items():
        served = f"{name}_total" if kind == "counter" and not name.endswith("_total") else name
        assert f"`{served}`" in reference, served


def _routes(patterns: list[URLPattern | URLResolver], prefix: str = "") -> list[str]:
    """Every route under ``patterns``, skipping catch-all fallbacks (a JSON 404)."""
    found: list[str] = []
    for pattern in patterns:
        if pattern.pattern.regex.fullmatch("any/path/at-all/"):
            continue
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found += _routes(list(pattern.url_patterns), route)
        else:
            found.append(route)
    return found


def test_every_api_route_is_documented() -> None:
    from weft_django.api import urls

    routes = _routes(list(urls.urlpatterns))
    assert len(routes) >= 10, routes
    reference = _read(REFERENCE / "api.md")
    for route in routes:
        openapi_path = "/api/weft/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)
        assert f"`{openapi_path}`" in reference, openapi_path


def test_every_management_command_is_documented() -> None:
    commands = sorted(name for name, app in get_commands().items() if app == "weft_django")
    assert "weft_worker" in commands, commands
    reference = _read(REFERENCE / "commands.md")
    for name in commands:
        assert f"\n## {name}\n" in reference, name


# --------------------------------------------------------------------------- links

LINK = re.compile(r"\]\(([^)\s]+)\)")


def _markdown_files() -> list[Path]:
    return [README, REPO_ROOT / "CHANGELOG.md", *sorted(DOCS.rglob("*.md"))]


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    for target in LINK.findall(_read(path)):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        file_part = target.split("#", 1)[0]
        resolved = (path.parent / file_part).resolve()
        assert resolved.exists(), f"{path.relative_to(REPO_ROOT)} links to missing {target}"


def test_readme_links_the_documentation() -> None:
    section = _readme_section("Documentation")
    for page in ("docs/tutorial.md", "docs/concepts.md", "docs/README.md"):
        assert f"({page})" in section, page
