"""Import cycles among a package's modules: module-level, lazy and ``TYPE_CHECKING`` imports
all count (a hidden cycle still ties two modules' jobs). Unlike ``acyclic_siblings`` it sees a
package and its submodules, and names each edge's line: ``python -m devtools.check_cycles``."""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

Edges = dict[str, dict[str, int]]  # importer -> {imported: line of the first import}


def _imported(node: ast.AST, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    """What ``node`` imports: ``from pkg import sub`` is ``pkg.sub`` when that is a module."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        parts = module.split(".")[: None if is_package else -1]
        parts = parts[: len(parts) - node.level + 1] if node.level else []
        base = ".".join([*parts, *([node.module] if node.module else [])])
        for alias in node.names:
            yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base


def import_edges(package_dir: Path) -> Edges:
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    edges: Edges = {name: {} for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            for target in _imported(node, name, path.name == "__init__.py", set(modules)):
                if target in modules and target != name:
                    edges[name].setdefault(target, getattr(node, "lineno", 0))
    return edges


def find_cycles(edges: Edges) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low = dict(index)
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
            if w in stack:
                low[v] = min(low[v], low[w])
        if low[v] == index[v]:
            component = [stack.pop()]
            while component[-1] != v:
                component.append(stack.pop())
            found.extend([sorted(component)] if len(component) > 1 else [])

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("package_dir", nargs="?", default="weft_django")
    parser.add_argument("--ignore", nargs="*", default=[], metavar="IMPORTER:IMPORTED")
    args = parser.parse_args(argv)
    package_dir = Path(args.package_dir).resolve()
    edges = import_edges(package_dir)
    for a, _, b in (pair.partition(":") for pair in args.ignore):  # breaks no cycle
        edges.get(a, {}).pop(b, None)
    for cycle in (cycles := find_cycles(edges)):
        print("cycle: " + " <-> ".join(cycle))
        inner = [(src, b, n) for src in cycle for b, n in edges[src].items() if b in cycle]
        print("\n".join(f"    {src} -> {b} (line {n})" for src, b, n in inner))
    print(f"{len(cycles)} import cycle(s) in {package_dir.name}")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
