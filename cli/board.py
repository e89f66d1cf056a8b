"""Text rendering of the listener board (``kickoff listeners status``) and its ``--watch`` loop."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

import click

from cli.table import render_table
from config.errors import KickoffError
from lifecycle.board import BoardEntry

#: (header, right-aligned) per column; the reason column comes last and is not padded.
COLUMNS = (
    ("match_id", False),
    ("sr_id", False),
    ("title", False),
    ("league", False),
    ("status", False),
    ("badge", False),
    ("exit", True),
    ("hb_age_s", True),
    ("att", True),
    ("exh", False),
    ("pend", False),
    ("dispatch", False),
    ("gaps", False),
    ("archive", False),
    ("reason", False),
)


def _cells(e: BoardEntry) -> list[str]:
    return [
        e.match_id,
        e.sr_id,
        e.title or "-",
        e.league,
        e.match_status,
        f"{e.badge} (degraded)" if e.degraded else e.badge,
        "" if e.exit_code is None else str(e.exit_code),
        "" if e.heartbeat_age_s is None else f"{e.heartbeat_age_s:.0f}",
        str(e.attempts),
        "yes" if e.exhausted else "no",
        "yes" if e.pending else "no",
        "on" if e.auto_dispatch else "off",
        e.gaps_text,
        e.archive_text,
        e.reason or (f"took over: {e.takeover}" if e.takeover else ""),
    ]


def render_board(entries: Sequence[BoardEntry]) -> list[str]:
    """A header row and one line per entry, columns padded to their widest cell."""
    return render_table(
        [name for name, _ in COLUMNS],
        (_cells(e) for e in entries),
        empty="no matches on the board",
        right=[name for name, right in COLUMNS if right],
    )


def watch(draw: Callable[[], None], *, seconds: float) -> None:
    """Call ``draw`` now and every ``seconds`` until Ctrl-C (which ends quietly, exit status 0).

    The screen is cleared before each draw on a terminal. A kickoff error in the first draw
    (unknown match, service down) ends the command as usual; in a later draw (a service briefly
    down) it prints one line and the loop goes on.
    """
    first = True
    try:
        while True:
            if sys.stdout.isatty():
                click.clear()
            try:
                draw()
            except KickoffError as exc:
                if first:
                    raise
                click.echo(f"Error: {exc}")
            first = False
            sys.stdout.flush()
            time.sleep(seconds)
    except KeyboardInterrupt:
        click.echo("")
