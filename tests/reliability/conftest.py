"""Options of the reliability battery.

``--soak`` (or ``WEFT_SOAK=1`` in the environment) runs the model-based
tests for many more examples than the CI bound. pytest only honours
``pytest_addoption`` in *initial* conftests (the root one, or this one when
``tests/reliability`` is named on the command line), so the environment
variable is the form that works from anywhere.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak",
        action="store_true",
        default=False,
        help="run the reliability battery's model-based tests for many more examples",
    )


@pytest.fixture
def soak(request: pytest.FixtureRequest) -> bool:
    """True when a soak run was asked for (``--soak`` or ``WEFT_SOAK=1``)."""
    try:
        option = bool(request.config.getoption("soak"))
    except ValueError:  # the option was not registered (non-initial conftest)
        option = False
    return option or os.environ.get("WEFT_SOAK") == "1"
