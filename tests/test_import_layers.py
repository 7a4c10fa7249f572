"""The library's modules import one way: no loops, and the generic storage layer knows nothing of shards.

Every import is read from the source (``ast``), those inside functions too, so a lazy import cannot hide a loop.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules(*packages: str) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file under ``packages`` (a package's ``__init__`` is its name)."""
    out = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``name`` imports (``from pkg import sub`` names the submodule)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m in known and m != name}


def _loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def _graph(*packages: str) -> dict[str, set[str]]:
    known = _modules(*packages)
    return {name: _imports(name, path, known) for name, path in known.items()}


def test_no_modules_of_the_library_or_the_benchmarks_import_each_other_in_a_loop() -> None:
    assert _loops(_graph("streamcli", "benchmarks")) == []


def test_the_storage_package_imports_nothing_of_the_shards_package() -> None:
    graph = _graph("streamcli")
    back = {
        m: sorted(t for t in graph[m] if t.startswith("streamcli.shards"))
        for m in graph
        if m.startswith("streamcli.storage")
    }
    assert {m: t for m, t in back.items() if t} == {}


def test_the_library_below_the_package_face_never_imports_the_face_or_the_cli() -> None:
    graph = _graph("streamcli")
    up = {
        m: sorted(t for t in targets if t == "streamcli" or t.startswith("streamcli.cli"))
        for m, targets in graph.items()
        if m not in ("streamcli", "streamcli.__main__", "streamcli.console") and not m.startswith("streamcli.cli")
    }
    assert {m: t for m, t in up.items() if t} == {}


def test_the_loop_finder_finds_a_loop() -> None:
    assert _loops({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
