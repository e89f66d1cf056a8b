"""The suite and the benchmarks share only ``harness/``: neither imports the other, and the harness
imports neither (issue 38: the chaos harness is a tool, not a benchmark)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Which top-level folders each one's modules may not import. ``bench/tests`` (the benchmarks' own
#: tests) is bench: it imports bench, never tests; ``tests/bench`` is the suite: it runs bench's
#: scripts as processes, never imports them.
FORBIDDEN = {"tests": {"bench"}, "bench": {"tests"}, "harness": {"tests", "bench"}}


def imported_top_levels(path: Path) -> set[str]:
    """The top-level names every import of ``path`` names (inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_tests_bench_and_harness_import_only_what_they_may(folder: str) -> None:
    wrong = {
        str(path.relative_to(ROOT)): sorted(imported_top_levels(path) & FORBIDDEN[folder])
        for path in sorted((ROOT / folder).rglob("*.py"))
    }
    assert {path: names for path, names in wrong.items() if names} == {}


def test_an_import_of_the_other_folder_is_seen(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from bench._verdict import Bench\n    import tests.conftest\n")
    assert imported_top_levels(module) >= {"bench", "tests"}
