"""Doc figures from bench results: fill (or check) the figures README.md and docs/*.md quote.

A figure in a doc is a marker around its value::

    kill to live data: p99 <!--bench:recovery:kill_to_live_s.p99:.1f-->9.8<!--/bench--> s

``recovery`` names ``bench/results/recovery.json`` (a bench's ``--save``; ``api_latency-viewers``
names ``api_latency-viewers.json``), ``kill_to_live_s.p99`` the value's dotted path in its
``figures`` (or, for ``machine``, ``measured_at``, ``verdict``, ``args`` and ``goals``, in the
result itself), ``.1f`` a Python format spec (default ``g``; ``,.0f`` for thousands). The path
``machine`` alone renders the machine of the run as a short text (cores, CPU probe, load).

    .venv/bin/python bench/docfigures.py          # rewrite every marker's value from its result file
    .venv/bin/python bench/docfigures.py --check  # exit 1 naming each value that differs (a test runs this)

A marker whose result file or figure is missing is an error in both modes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
MARKER = re.compile(
    r"<!--bench:(?P<result>[\w-]+):(?P<path>[\w.]+)(?::(?P<spec>[^>]*?))?-->(?P<value>.*?)<!--/bench-->",
    re.DOTALL,
)
#: Paths looked up in the result itself, not in its figures.
ROOT_KEYS = frozenset({"machine", "measured_at", "verdict", "args", "goals", "variant"})


class FigureError(Exception):
    """A marker names a result file or figure that does not exist, or a format that does not apply."""


@dataclass(frozen=True)
class Difference:
    """A marker whose value in the doc is not its result's."""

    doc: Path
    line: int
    marker: str
    written: str
    expected: str

    def __str__(self) -> str:
        where = self.doc.relative_to(REPO) if self.doc.is_relative_to(REPO) else self.doc
        return f"{where}:{self.line}: {self.marker} says {self.written!r}, its result says {self.expected!r}"


def docs(repo: Path = REPO) -> list[Path]:
    """The documents whose markers are filled: README.md and docs/*.md."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def load_result(name: str, results: Path) -> dict[str, Any]:
    path = results / f"{name}.json"
    if not path.is_file():
        raise FigureError(f"no result file {path} (run the bench with --save)")
    return json.loads(path.read_text())


def machine_text(machine: dict[str, Any]) -> str:
    """The machine of a run as a short text."""
    probe = machine.get("probe", {}).get("python_loop_ms")
    load = machine.get("load_before", [None])[0]
    parts = [f"{machine.get('cores')} cores"]
    if probe is not None:
        parts.append(f"CPU probe {probe:.0f} ms")
    if load is not None:
        parts.append(f"load average {load:.1f}")
    return ", ".join(parts)


def render(result: dict[str, Any], path: str, spec: str | None) -> str:
    """The text of the figure at ``path`` of ``result`` in format ``spec``."""
    if path == "machine":
        return machine_text(result["machine"])
    parts = path.split(".")
    node: Any = result if parts[0] in ROOT_KEYS else result.get("figures", {})
    for part in parts:
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise FigureError(
                f"no figure {path!r} in the result of {result.get('bench')} {result.get('variant')}"
            )
    if node is None:
        raise FigureError(f"figure {path!r} was not measured in {result.get('bench')}")
    try:
        return format(node, spec or ("g" if isinstance(node, float) else ""))
    except (TypeError, ValueError) as exc:
        raise FigureError(f"format {spec!r} does not apply to {path!r} ({node!r}): {exc}") from exc


def fill(text: str, results: Path, cache: dict[str, dict[str, Any]]) -> Iterator[tuple[re.Match[str], str]]:
    """Each marker of ``text`` with the value its result gives."""
    for match in MARKER.finditer(text):
        name = match["result"]
        if name not in cache:
            cache[name] = load_result(name, results)
        yield match, render(cache[name], match["path"], match["spec"])


def differences(paths: Iterable[Path], results: Path = RESULTS) -> list[Difference]:
    """Every marker of ``paths`` whose value differs from its result (FigureError for a missing one)."""
    cache: dict[str, dict[str, Any]] = {}
    out = []
    for doc in paths:
        text = doc.read_text()
        for match, value in fill(text, results, cache):
            if match["value"] != value:
                line = text.count("\n", 0, match.start()) + 1
                marker = f"{match['result']}:{match['path']}"
                out.append(Difference(doc, line, marker, match["value"], value))
    return out


def write(paths: Iterable[Path], results: Path = RESULTS) -> int:
    """Rewrite every marker's value from its result; the number of values changed."""
    cache: dict[str, dict[str, Any]] = {}
    changed = 0
    for doc in paths:
        text = doc.read_text()
        pieces, last = [], 0
        for match, value in fill(text, results, cache):
            pieces.append(text[last : match.start("value")] + value)
            last = match.end("value")
            changed += match["value"] != value
        new = "".join(pieces) + text[last:]
        if new != text:
            doc.write_text(new)
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a figure differs")
    args = parser.parse_args()
    try:
        if args.check:
            found = differences(docs())
            for difference in found:
                print(difference)
            return 1 if found else 0
        print(f"{write(docs())} figures changed")
        return 0
    except FigureError as exc:
        print(f"docfigures: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
