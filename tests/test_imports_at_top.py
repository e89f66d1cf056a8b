"""Imports at the top of modules (ruff PLC0415): the allowlist in pyproject.toml only shrinks."""

from __future__ import annotations

import ast
import tomllib

from tests.project import ROOT

#: Folders allowed to import inside functions for good (pyproject.toml says why).
FOR_GOOD = {"cli/**", "tests/**", "bench/**"}


def _allowlisted() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    ignores = config["tool"]["ruff"]["lint"]["per-file-ignores"]
    return sorted(path for path, codes in ignores.items() if "PLC0415" in codes and path not in FOR_GOOD)


def _imports_inside_functions(source: str) -> int:
    tree = ast.parse(source)
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            count += sum(isinstance(inner, ast.Import | ast.ImportFrom) for inner in ast.walk(node))
    return count


def test_every_module_on_the_not_yet_moved_list_still_imports_inside_a_function() -> None:
    listed = _allowlisted()
    assert listed, "the list is empty: drop this test and its comment in pyproject.toml"
    moved = [path for path in listed if not _imports_inside_functions((ROOT / path).read_text())]
    assert moved == [], f"no longer imports inside functions: drop them from pyproject.toml: {moved}"


def test_the_count_finds_an_import_inside_a_function() -> None:
    assert _imports_inside_functions("import os\ndef f():\n    import sys\n") == 1
    assert _imports_inside_functions("import os\n") == 0
