"""Plain-text tables of the CLI: a header row, columns padded to their widest cell, a line when empty."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import click

from cli.common import echo_json

T = TypeVar("T")


def render_table(
    headers: Sequence[str], rows: Iterable[Sequence[object]], *, empty: str, right: Iterable[str] = ()
) -> list[str]:
    """Lines of a table: the headers, then one line per row; ``empty`` alone when there is no row.

    Every column is as wide as its widest cell (long ids never shift the next column); the last
    column is not padded. Columns named in ``right`` are right-aligned; None prints as nothing.
    """
    body = [["" if cell is None else str(cell) for cell in row] for row in rows]
    if not body:
        return [empty]
    table = [list(headers), *body]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    aligned = set(right)
    lines = []
    for row in table:
        cells = [
            cell.rjust(w) if name in aligned else cell.ljust(w)
            for cell, w, name in zip(row[:-1], widths, headers, strict=False)
        ]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return lines


def echo_table(
    headers: Sequence[str], rows: Iterable[Sequence[object]], *, empty: str, right: Iterable[str] = ()
) -> None:
    """Print ``render_table``'s lines."""
    for line in render_table(headers, rows, empty=empty, right=right):
        click.echo(line)


def echo_listing(
    as_json: bool,
    name: str,
    items: Sequence[T],
    *,
    as_dict: Callable[[T], dict[str, Any]],
    headers: Sequence[str],
    row: Callable[[T], Sequence[object]],
    empty: str,
    right: Iterable[str] = (),
) -> None:
    """Print a listing: with --json one object ``{"count": N, name: [as_dict(item), ...]}``, else
    a table of ``row(item)`` under ``headers`` (``empty`` alone when there is no item)."""
    if as_json:
        echo_json({"count": len(items), name: [as_dict(item) for item in items]})
    else:
        echo_table(headers, (row(item) for item in items), empty=empty, right=right)
