"""``kickoff up``: the whole system on this machine in the foreground, until Ctrl-C.

Migrates and declares the outbox queues, then starts every process of ``deploy/Procfile`` (the
production list, read at start, so the two cannot drift) with srsim serving a few registered
is_test games that start within a minute. Each child's output is printed prefixed by its name
(one colour each on a terminal). Ctrl-C (or SIGTERM) stops the children, the last started first;
a child that dies is reported at once with its last log lines, the others are stopped and ``up``
exits 1. The supervision is ``cli.processes.ProcessGroup``, the demo's.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from cli.context import CliContext
from cli.processes import ProcessGroup
from cli.procfile import ProcfileEntry, read_procfile, select_entries
from config.settings import KickoffSettings
from models.leagues import declared

SIM = "srsim"
API = "api"
COLOURS = ("cyan", "green", "yellow", "magenta", "blue", "red", "bright_cyan", "bright_green")
GAME_TITLES = ("HOU @ KC", "BOS @ NYY", "LAD @ CHC", "SEA @ SF", "ATL @ MIA", "DET @ CLE")
LAST_LINES = 20
BOARD_SECONDS = 5.0


def up_games(count: int, *, first_after: float = 20.0, spacing: float = 15.0) -> list[dict[str, Any]]:
    """``count`` is_test games for srsim, of each declared league in turn (models.leagues: the default 4
    plays one game of each): the first starts after ``first_after`` script seconds, the next ones
    ``spacing`` apart; each plays an event every 2 s for half an hour."""
    leagues = [d.name for d in declared()]
    return [
        {
            "sr_id": str(uuid.uuid4()),
            "league": leagues[i % len(leagues)],
            "title": GAME_TITLES[i % len(GAME_TITLES)],
            "is_test": True,
            "start_after": first_after + i * spacing,
            "event_interval": 2.0,
            "event_count": 900,
        }
        for i in range(count)
    ]


def child_argv(entry: ProcfileEntry, extra: list[str]) -> list[str]:
    """The Procfile command as honcho runs it (sh), exec'd so the child is the process itself."""
    command = " ".join([entry.command, *(shlex.quote(a) for a in extra)])
    return ["/bin/sh", "-c", f"exec {command}"]


class Printer:
    """Lines prefixed by process name, padded to the longest name, coloured on a terminal."""

    def __init__(self, names: list[str], *, colour: bool) -> None:
        self.width = max(len(n) for n in names)
        self.colour = colour
        self.colours = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(names)}

    def line(self, name: str, text: str, *, err: bool = False) -> None:
        prefix = f"{name:<{self.width}} |"
        if self.colour:
            prefix = click.style(prefix, fg=self.colours.get(name, "white"), bold=name == "up")
        click.echo(f"{prefix} {text}", err=err, color=self.colour)


@click.command("up")
@click.option("--port", type=int, default=None, help="Port of `kickoff serve` (default API_PORT).")
@click.option("--sim-port", type=int, default=None, help="Port of srsim (default SRSIM_PORT).")
@click.option("--no-sim", is_flag=True, help="Do not run srsim (listeners use SPORTRADAR_BASE_URL as set).")
@click.option(
    "--only",
    default=None,
    help="Comma-separated processes to run (deploy/Procfile names or a unique prefix: api,listener).",
)
@click.option(
    "--games",
    type=click.IntRange(0, 50),
    default=4,
    show_default=True,
    help="is_test games srsim plays, of each league in turn (4: one of each).",
)
@click.option(
    "--traces",
    is_flag=True,
    help="Every process prints its spans, one line of JSON each (OTEL_TRACES_EXPORTER=console); "
    "for a trace UI point OTEL_* at a local Jaeger instead (docs/tracing.md).",
)
@click.option(
    "--grace",
    type=float,
    default=40.0,
    show_default=True,
    help="Seconds each process gets to stop after SIGTERM before it is killed.",
)
@click.pass_obj
def up(
    obj: CliContext,
    port: int | None,
    sim_port: int | None,
    no_sim: bool,
    only: str | None,
    games: int,
    grace: float,
    traces: bool,
) -> None:
    """Run the whole system locally in the foreground until Ctrl-C.

    Applies migrations and declares the outbox queues (as `kickoff db migrate` and `kickoff amqp
    setup`), then starts the processes of deploy/Procfile (worker, listener-worker, scheduler,
    launcher, srsim, api) with their output prefixed by name. srsim plays GAMES registered is_test
    games that start within a minute; develop's scheduler dispatches them on its first tick, so
    the board shows Running listeners within about two minutes. Prints the console URL and an
    operator key created for this run (revoked when `up` stops). Ctrl-C stops every process, the
    last started first (a second Ctrl-C kills the rest); a process that dies is reported with its
    last lines and `up` exits 1.
    """
    s = obj.settings
    try:
        entries = select_entries(
            read_procfile(),
            only=[w.strip() for w in only.split(",") if w.strip()] if only else None,
            exclude=(SIM,) if no_sim else (),
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--only") from exc
    if not entries:
        raise click.BadParameter("no process left to run", param_hint="--only")
    names = [e.name for e in entries]
    api_port = s.api_port if port is None else port
    srsim_port = s.srsim_port if sim_port is None else sim_port
    run_dir = Path(s.data_dir).resolve() / "up" / time.strftime("%Y%m%dT%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    printer = Printer(["up", *names], colour=sys.stdout.isatty())
    say = printer.line

    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env["API_PORT"] = str(api_port)
    env["SRSIM_PORT"] = str(srsim_port)
    if SIM in names:
        env["SPORTRADAR_BASE_URL"] = f"http://{s.srsim_host}:{srsim_port}"
    if traces:
        _print_traces(env, say)

    _prepare(s, say)
    key_id = None
    if API in names:
        obj.database()
        key_id, key = _operator_key()
        say("up", f"console http://{s.api_host}:{api_port}/ (operator key {key}, revoked when up stops)")
    script = run_dir / "games.json"
    if SIM in names:
        script.write_text(json.dumps({"games": up_games(games)}, indent=1))

    stop, hurry = threading.Event(), threading.Event()

    def on_signal(*_: object) -> None:
        (hurry if stop.is_set() else stop).set()  # a second Ctrl-C kills what is still stopping

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    group = ProcessGroup(env, run_dir)
    code = 0
    try:
        for entry in sorted(entries, key=lambda e: e.name != SIM):  # the feed first, then Procfile order
            extra = ["--script", str(script), "--register"] if entry.name == SIM else []
            child = group.start(entry.name, child_argv(entry, extra))
            say("up", f"started {entry.name} (pid {child.pid}): {entry.command}")
        say("up", f"logs in {run_dir}; Ctrl-C stops everything")
        code = _supervise(group, printer, stop, board=lambda: _board_line(obj))
    finally:
        stop.set()
        say("up", "stopping " + ", ".join(reversed(list(group.children))) + " (Ctrl-C again: kill them)")
        killed = group.stop(grace=grace, hurry=hurry)
        for name, line in group.new_lines():
            say(name, line)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if key_id is not None:
            _revoke(key_id, say)
        say("up", "stopped" + (f" (killed: {', '.join(killed)})" if killed else ""))
    sys.exit(code)


def _print_traces(env: dict[str, str], say: Any) -> None:
    """--traces: the console exporter for every process, unless OTEL_TRACES_EXPORTER already chose one."""
    chosen = (env.get("OTEL_TRACES_EXPORTER") or "").strip()
    if chosen and chosen != "none":
        say("up", f"traces: OTEL_TRACES_EXPORTER={chosen} is set: spans go there, not to the console")
        return
    env["OTEL_TRACES_EXPORTER"] = "console"
    env.setdefault("OTEL_BSP_SCHEDULE_DELAY", "1000")
    say(
        "up",
        "traces: each process prints its spans as JSON lines (console exporter); for a trace UI run a "
        "local Jaeger (ports 16686 and 4318) and start up with OTEL_TRACES_EXPORTER=otlp "
        "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 TRACE_URL_TEMPLATE=http://localhost:16686/trace/{trace_id}",
    )


def _prepare(settings: KickoffSettings, say: Any) -> None:
    """Migrations and the outbox queues, as `kickoff db migrate` and `kickoff amqp setup`."""
    from models.migrate import migrate
    from publisher.amqp import publisher_from_settings
    from publisher.queues import OUTBOX_QUEUES

    report = migrate(settings.database_url)
    say("up", f"database {report.database}: {len(report.applied)} migrations applied, rest up to date")
    with publisher_from_settings(settings) as publisher:
        declared = publisher.declare_durable(list(OUTBOX_QUEUES))
    say("up", f"outbox queues declared: {', '.join(declared)}")


def _operator_key() -> tuple[str, str]:
    from api.keys import Scope, create_key

    key, secret = create_key(name=f"kickoff up on {socket.gethostname()}", scope=Scope.OPERATOR)
    return str(key.id), secret


def _revoke(key_id: str, say: Any) -> None:
    """Revoke ``up``'s operator key; a database that no longer answers is said, not raised."""
    from api.keys import revoke_key
    from config.errors import KickoffError

    try:
        revoke_key(key_id)
    except KickoffError as exc:
        say("up", f"operator key {key_id} not revoked ({exc}): kickoff apikeys revoke {key_id}")


def _board_line(obj: CliContext) -> str:
    """The listener board in one line: how many matches show each badge."""
    from collections import Counter

    from config.errors import KickoffError
    from lifecycle.board import listener_board

    try:
        obj.database()
        entries = listener_board(settings=obj.settings, coordination=obj.coordination)
    except KickoffError as exc:
        return f"board: not readable ({exc})"
    counts = Counter(e.badge for e in entries)
    return "board: " + (", ".join(f"{n} {badge}" for badge, n in sorted(counts.items())) or "no matches")


def _supervise(
    group: ProcessGroup, printer: Printer, stop: threading.Event, *, board: Callable[[], str]
) -> int:
    """Print the children's lines, and the board line when it changes (every BOARD_SECONDS),
    until ``stop`` is set (0) or a child ends (1, reported)."""
    said, next_board = "", 0.0
    while not stop.is_set():
        if time.monotonic() >= next_board:
            line, next_board = board(), time.monotonic() + BOARD_SECONDS
            if line != said:
                printer.line("up", line)
                said = line
        for name, line in group.new_lines():
            printer.line(name, line)
        dead = group.exited()
        if dead:
            for name, line in group.new_lines():
                printer.line(name, line)
            for name, code in dead:
                printer.line("up", f"{name} exited with code {code}; its last lines:", err=True)
                for line in group.children[name].last_lines(LAST_LINES):
                    printer.line(name, line, err=True)
            return 1
        stop.wait(0.2)
    return 0
