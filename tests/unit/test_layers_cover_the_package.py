"""The import contracts name every part of the package.

"0 violations" from ``lint-imports`` means something only for the modules a
contract names: a new root module or folder that no layer names could import
anything. This test fails until it is given a layer in ``pyproject.toml``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import weft_django

PACKAGE = Path(weft_django.__file__).parent
ROOT = PACKAGE.parent


def _layered_names() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["id"] == "layers"]
    names: set[str] = set()
    for layer in layers["layers"]:
        names.update(re.findall(r"weft_django\.(\w+)", layer))
    return names


def _root_parts() -> set[str]:
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    return modules | folders


def test_every_root_module_and_folder_is_in_a_layer() -> None:
    missing = _root_parts() - _layered_names()
    assert not missing, f"name these in pyproject.toml's layers contract: {sorted(missing)}"


def test_the_layers_name_nothing_that_is_gone() -> None:
    assert _layered_names() <= _root_parts()


def test_the_engine_wings_are_all_in_the_engine_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (wings,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "engine-wings"]
    named = {w for layer in wings["layers"] for w in re.findall(r"\w+", layer)}
    folders = {p.name for p in (PACKAGE / "engine").iterdir() if (p / "__init__.py").is_file()}
    assert folders <= named, f"engine wings in no layer: {sorted(folders - named)}"
