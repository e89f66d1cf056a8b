"""Imports go only downward between the top-level packages, and no two modules import each other.

The layers, lowest first (a package may import only the packages listed for it):

    config
    models                              (the one owner of Redis keys and of the database handle)
    listener, srsim, publisher          (the listener body; the feed simulator; activity publishing)
    players, client                     (player sync and rumor scoring; kickoff's own trigger clients)
    lifecycle, runs                     (the listener control plane; job runs and the launcher)
    actors                              (Dramatiq set-up and thin actors)
    scheduler
    api
    cli

Every import counts, also one inside a function: a lazy import still ties two modules together.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.project import PACKAGES, ROOT, product_modules

ALLOWED: dict[str, set[str]] = {"config": set()}


def _above(*packages: str) -> set[str]:
    """What a package directly above ``packages`` may import: them and all they may import."""
    return set(packages).union(*(ALLOWED[package] for package in packages))


ALLOWED["models"] = _above("config")
for _package in ("listener", "srsim", "publisher"):
    ALLOWED[_package] = _above("models")
for _package in ("players", "client"):
    ALLOWED[_package] = _above("publisher")
ALLOWED["lifecycle"] = _above("listener", "srsim")
ALLOWED["runs"] = _above("players", "client")
ALLOWED["actors"] = _above("lifecycle", "runs")
ALLOWED["scheduler"] = _above("actors")
ALLOWED["api"] = _above("scheduler")
ALLOWED["cli"] = _above("api")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in product_modules()}


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The kickoff modules ``path`` imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            while name not in modules and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in modules:
                found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(p, modules) - {m} for m, p in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_every_top_level_package_is_in_the_layer_table():
    assert set(PACKAGES) == set(ALLOWED)


def test_packages_import_only_the_layers_below_them():
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in _graph().items()
        for target in targets
        if target.split(".")[0] != module.split(".")[0]
        and target.split(".")[0] not in ALLOWED[module.split(".")[0]]
    )
    assert upward == []


def test_no_modules_import_each_other_in_a_circle():
    assert _cycle(_graph()) is None


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": {"b2"}, "b2": {"b"}}, ["b", "b2", "b"]),
    ],
)
def test_the_cycle_finder_finds_a_circle_and_only_a_circle(graph, expected):
    assert _cycle(graph) == expected


def test_an_upward_import_is_seen_also_inside_a_function(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from cli.main import main\n    import actors.actor_runtime\n")
    modules = {"cli.main": Path(), "actors.actor_runtime": Path(), "actors": Path()}
    assert _imports(source, modules) == {"cli.main", "actors.actor_runtime"}
