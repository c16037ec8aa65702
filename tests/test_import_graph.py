"""The package's import graph has no cycle: neither between modules nor between packages.

The graph is read from the source with :mod:`ast`; nothing is imported. Every ``import`` counts, wherever it stands:
a lazy import inside a function that dodges a cycle at load time is still a cycle in the design (a lower layer
reaching up), and so is an import under ``if TYPE_CHECKING:`` (a lower layer that needs a higher one's type takes a
``Protocol`` of its own instead).

A package is the first two dotted parts of a module's name where that names a directory (``edgevoice.listen``); a
top-level module (``edgevoice.converse``) is a package of its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "edgevoice"


def module_names(package_dir: Path) -> dict[str, Path]:
    """Each module's dotted name (a package's ``__init__`` under the package's own name) and its file."""
    names: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        name = ".".join(parts).removesuffix(".__init__")
        names[name] = path
    return names


def import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in the tree, however deep (in a function, under ``if TYPE_CHECKING:``)."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def module_deps(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports (the nearest enclosing module for ``from x import y``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    deps: set[str] = set()
    for node in import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            # importing one's own enclosing package (its __init__) is how a submodule is reached, not a dependency
            if target and target != name and not name.startswith(target + "."):
                deps.add(target)
    return deps


def package_of(name: str, package_dir: Path) -> str:
    parts = name.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (package_dir.parent / parts[0] / parts[1]).is_dir()):
        return ".".join(parts[:2])
    return name


def package_graph(modules: dict[str, set[str]], package_dir: Path) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, deps in modules.items():
        own = package_of(name, package_dir)
        graph.setdefault(own, set()).update(p for p in (package_of(d, package_dir) for d in deps) if p != own)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one node, as a path that returns to its start."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the graph is a few hundred nodes, recursion is fine
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [shortest_cycle(graph, component) for component in components]


def shortest_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path from the component's first node back to itself, staying inside the component."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph.get(node, set()) & component):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if succ not in previous:
                    previous[succ] = node
                    following.append(succ)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(component)}")


def graphs(package_dir: Path) -> dict[str, dict[str, set[str]]]:
    files = module_names(package_dir)
    modules = {name: module_deps(name, path, files) for name, path in files.items()}
    return {"module": modules, "package": package_graph(modules, package_dir)}


@pytest.mark.parametrize("level", ["module", "package"])
def test_no_import_cycle(level: str) -> None:
    found = cycles(graphs(PACKAGE)[level])
    assert not found, f"{level} import cycles: " + "; ".join(" -> ".join(cycle) for cycle in found)


def write_package(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_lazy_import_closes_a_cycle(tmp_path: Path) -> None:
    package_dir = write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low/__init__.py": "",
            "pkg/low/a.py": "def f():\n    from pkg.high.b import g\n    return g\n",
            "pkg/high/__init__.py": "",
            "pkg/high/b.py": "from ..low import a\n",
        },
    )
    found = graphs(package_dir)
    assert cycles(found["module"]) == [["pkg.high.b", "pkg.low.a", "pkg.high.b"]]
    assert cycles(found["package"]) == [["pkg.high", "pkg.low", "pkg.high"]]


def test_a_type_checking_import_closes_a_cycle(tmp_path: Path) -> None:
    package_dir = write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
            "pkg/b.py": "from pkg import a\n",
        },
    )
    assert cycles(graphs(package_dir)["module"]) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_a_package_cycle_through_sibling_modules(tmp_path: Path) -> None:
    package_dir = write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/one/__init__.py": "",
            "pkg/one/x.py": "from pkg.two.y import Y\n",
            "pkg/two/__init__.py": "",
            "pkg/two/y.py": "",
            "pkg/two/z.py": "from pkg.one import w\n",
            "pkg/one/w.py": "",
        },
    )
    found = graphs(package_dir)
    assert cycles(found["module"]) == []
    assert cycles(found["package"]) == [["pkg.one", "pkg.two", "pkg.one"]]


def missing_imports(files: list[Path], modules: dict[str, Path]) -> list[str]:
    """``file:line module`` for each absolute import of an ``edgevoice`` module that does not exist. mypy does not see
    these (``ignore_missing_imports``), and a lazy one fails only when its function runs: after a module moves."""
    missing = []
    for path in files:
        for node in import_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else []
            else:
                names = [alias.name for alias in node.names]
            missing += [
                f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{node.lineno} {name}"
                for name in names
                if name.split(".")[0] == "edgevoice" and name not in modules
            ]
    return missing


def test_every_import_of_the_package_names_a_module_that_exists() -> None:
    files = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "tests").glob("*.py"), *(ROOT / "scripts").glob("*.py")])
    assert missing_imports(files, module_names(PACKAGE)) == []


def test_a_lazy_import_of_a_moved_module_is_found(tmp_path: Path) -> None:
    (tmp_path / "edgevoice").mkdir()
    (tmp_path / "edgevoice" / "__init__.py").write_text("")
    (tmp_path / "edgevoice" / "here.py").write_text("")
    user = tmp_path / "edgevoice" / "user.py"
    user.write_text("def f():\n    from edgevoice.gone import g\n    from edgevoice.here import h\n")
    found = missing_imports([user], module_names(tmp_path / "edgevoice"))
    assert [line.split(" ", 1)[1] for line in found] == ["edgevoice.gone"]
