"""devtools.check_cycles on a tiny synthetic package: every kind of import counts."""

from __future__ import annotations

from pathlib import Path

from devtools.check_cycles import find_cycles, import_edges, main


def make_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_function_level_type_checking_and_relative_imports_all_count(tmp_path: Path) -> None:
    package = make_package(
        tmp_path,
        {
            "a.py": "from pkg import b\n",
            "b.py": "def f():\n    from pkg.a import thing\n",
            "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import D\n",
            "d.py": "from . import c\n",
            "e.py": "import pkg.a\nimport os\n",  # imports into a cycle, is not in one
            "sub/__init__.py": "from pkg.sub.inner import x\n",
            "sub/inner.py": "from .. import sub\n",  # a package and its own submodule
        },
    )
    assert find_cycles(import_edges(package)) == [
        ["pkg.a", "pkg.b"],
        ["pkg.c", "pkg.d"],
        ["pkg.sub", "pkg.sub.inner"],
    ]


def test_from_package_import_submodule_is_an_edge_to_the_submodule(tmp_path: Path) -> None:
    package = make_package(
        tmp_path,
        {"__init__.py": "from pkg import a\n", "a.py": "from pkg import b\n", "b.py": ""},
    )
    assert import_edges(package) == {"pkg": {"pkg.a": 1}, "pkg.a": {"pkg.b": 1}, "pkg.b": {}}
    assert find_cycles(import_edges(package)) == []


def test_main_reports_each_edge_and_an_ignored_edge_breaks_the_cycle(
    tmp_path: Path, capsys
) -> None:
    package = make_package(tmp_path, {"a.py": "import pkg.b\n", "b.py": "\n\nimport pkg.a\n"})
    assert main([str(package)]) == 1
    out = capsys.readouterr().out
    assert "cycle: pkg.a <-> pkg.b" in out
    assert "pkg.b -> pkg.a (line 3)" in out
    assert main([str(package), "--ignore", "pkg.b:pkg.a"]) == 0
    assert "0 import cycle(s)" in capsys.readouterr().out
