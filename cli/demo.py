"""``kickoff demo``: the whole system on this machine in about two minutes, with a summary.

Migrates, starts srsim with three scripted is_test games, the scheduler, the default worker and
the listener worker as subprocesses, then plays a script of its own: the first game's listener
worker is killed with SIGKILL mid-game and restarted (its run goes Stale, is swept as Abandoned
(14) and dispatched again), the second game has a rain delay longer than the idle-heartbeat limit,
the third is a plain game. The killed game's successor backfills what the kill missed from
srsim's play-by-play, so every archive ends complete: the summary prints each game's events
live / backfilled / missing (missing: what verify-archive would report). It nudges sweep and
dispatch every few seconds (a faster scheduler) and prints a live board; at the end, each match's
status, each listener's exit code and the events archived. Short intervals come from environment
settings given to every process.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from cli.common import json_option
from cli.context import CliContext
from cli.processes import ProcessGroup, dramatiq_worker_argv
from cli.table import render_table
from config.settings import KickoffSettings
from models.leagues import DEFAULT

#: Settings of every demo process (short intervals so the demo takes about two minutes).
DEMO_ENV = {
    "APP_ENV": "develop",
    "LISTENER_HEARTBEAT_INTERVAL_SECONDS": "1",
    "LISTENER_HEARTBEAT_STALE_SECONDS": "6",
    "LISTENER_STOP_POLL_SECONDS": "0.5",
    "LISTENER_MAX_CONSECUTIVE_HEARTBEATS": "60",  # 30 s of idle stream (heartbeat every 0.5 s)
    "LISTENER_STATUS_RELOAD_HEARTBEATS": "4",
    "LISTENER_RECONNECT_BACKOFF_SECONDS": "0.5",
    "SRSIM_HEARTBEAT_SECONDS": "0.5",
}
KILL_AFTER_EVENTS = 6


@dataclass
class DemoGame:
    """One demo game: its script and its Match row once created."""

    role: str  # "kill drill" | "rain delay" | "plain"
    sr_id: str
    title: str
    script: dict[str, Any]
    match_id: str | None = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _games() -> list[DemoGame]:
    def game(role: str, title: str, **kw: Any) -> DemoGame:
        sr_id = str(uuid.uuid4())
        script = {"sr_id": sr_id, "league": DEFAULT.name, "title": title, "is_test": True}
        script["event_interval"] = 1.0
        script.update(kw)
        return DemoGame(role=role, sr_id=sr_id, title=title, script=script)

    return [
        game("kill drill", "HOU @ KC (worker killed)", start_after=12, event_count=40),
        game(
            "rain delay",
            "BOS @ NYY (rain delay)",
            start_after=45,
            event_count=30,
            game_delay_at_event=10,
            delay_seconds=35,
        ),
        game("plain", "LAD @ CHC", start_after=45, event_count=30),
    ]


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


@click.command("demo")
@json_option("Print only the summary, as one JSON object (board on stderr).")
@click.option(
    "--timeout", type=float, default=240.0, show_default=True, help="Give up after this many seconds."
)
@click.pass_obj
def demo(obj: CliContext, as_json: bool, timeout: float) -> None:
    """Run the whole system locally and show it working (about two minutes).

    Needs PostgreSQL, Redis and RabbitMQ as configured (DATABASE_URL, REDIS_URL, BROKER_URL).
    Starts `kickoff sim serve`, `kickoff scheduler`, a default `dramatiq` worker and a listener
    worker; kills the listener worker mid-game and restarts it; prints a board every 2 s and a
    summary. Exit status 0 when every game ended closed with exit 13 and the drills behaved.
    `--json` prints {"ok", "matches": [{"sr_id", "status", "exit_code", "events", "archive"}]};
    "archive" is the game's event log exported to DATA_DIR/exports/{shortcode}.json at the end.
    """
    obj.log_progress()
    os.environ.update({k: os.environ.get(f"KICKOFF_DEMO_{k}", v) for k, v in DEMO_ENV.items()})
    port = _free_port()
    os.environ["SPORTRADAR_BASE_URL"] = f"http://127.0.0.1:{port}"

    from config.settings import load_settings
    from models.db import init_database
    from models.migrate import migrate

    settings = load_settings()
    migrate(settings.database_url)
    init_database(settings.database_url)

    out = sys.stderr if as_json else sys.stdout
    games = _games()
    run_dir = Path(settings.data_dir).resolve() / "demo" / time.strftime("%Y%m%dT%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    script = run_dir / "games.json"
    script.write_text(json.dumps({"games": [g.script for g in games]}, indent=1))
    procs = ProcessGroup(os.environ, run_dir)
    started = time.monotonic()
    try:
        procs.start("srsim", [_bin("kickoff"), "sim", "serve", "--port", str(port), "--script", str(script)])
        procs.start("scheduler", [_bin("kickoff"), "scheduler"])
        procs.start(
            "worker",
            dramatiq_worker_argv("default", threads=4),
        )
        listener_worker = dramatiq_worker_argv("match_listeners", threads=8, shutdown_timeout_ms=5000)
        procs.start("listener-worker", listener_worker)
        print(f"kickoff demo: logs in {run_dir}; srsim on port {port}", file=out, flush=True)
        _create_match(games[0], speed_started=started)
        result = _play(games, procs, listener_worker, settings, out=out, started=started, timeout=timeout)
    finally:
        procs.stop(grace=10)
    if as_json:
        click.echo(json.dumps(result, default=str))
    else:
        _print_summary(result, out)
    sys.exit(0 if result["ok"] else 1)


def _create_match(game: DemoGame, *, speed_started: float) -> None:
    from config.clock import utcnow
    from lifecycle.leagues import ensure_league
    from models.boundary import connection
    from models.match import create_match

    kickoff_in = game.script["start_after"] - (time.monotonic() - speed_started)
    with connection():
        league = ensure_league(DEFAULT.name)
        match = create_match(
            sr_id=game.sr_id,
            league=league,
            title=game.title,
            is_test=True,
            scheduled=utcnow() + timedelta(seconds=max(kickoff_in, 0)),
        )
    game.match_id = str(match.id)


def _play(
    games: list[DemoGame],
    procs: ProcessGroup,
    listener_worker: list[str],
    settings: KickoffSettings,
    *,
    out: Any,
    started: float,
    timeout: float,
) -> dict[str, Any]:
    from actors.listeners import send_start  # sets up the broker from the demo's settings
    from lifecycle.cleanup import sweep_stale_match_listeners
    from lifecycle.dispatch import dispatch_upcoming_match_listeners
    from models.coordination import CoordinationStore

    coordination = CoordinationStore.from_settings(settings)
    killed = False
    next_nudge = next_board = 0.0
    while time.monotonic() - started < timeout:
        now = time.monotonic()
        rows = [_row(g, settings) for g in games]
        if not killed and rows[0]["events"] >= KILL_AFTER_EVENTS and rows[0]["badge"] == "Running":
            print("-- SIGKILL the listener worker mid-game, then restart it --", file=out, flush=True)
            procs.kill9("listener-worker")
            procs.start("listener-worker", listener_worker)
            for g in games[1:]:
                _create_match(g, speed_started=started)
            killed = True
        if now >= next_nudge:
            sweep_stale_match_listeners(settings=settings, coordination=coordination)
            dispatch_upcoming_match_listeners(
                is_test=True, settings=settings, coordination=coordination, send=send_start
            )
            next_nudge = now + 3
        if now >= next_board:
            _print_board(rows, out, now - started)
            next_board = now + 2
        if killed and all(
            r["status"] == "closed" and r["exit_code"] is not None and not r["open"] for r in rows
        ):
            break
        time.sleep(0.5)
    rows = [_row(g, settings) for g in games]
    _print_board(rows, out, time.monotonic() - started)
    for game, row in zip(games, rows, strict=True):
        row["missing"], row["extra"] = _verify(game, settings)
        row["archive"] = _export(game, settings)
    checks = {
        "every game closed with exit 13": all(r["status"] == "closed" and r["exit_code"] == 13 for r in rows),
        "killed listener was Abandoned (14) then recovered": 14 in rows[0]["history"]
        and rows[0]["exit_code"] == 13,
        "rain delay kept the listener up (delay markers)": rows[1]["delay_markers"] > 0
        and rows[1]["runs"] == 1,
        "events archived": all(r["events"] > 0 for r in rows),
        "every archive complete (verify-archive ok)": all(r["missing"] == 0 == r["extra"] for r in rows),
    }
    return {
        "ok": all(checks.values()) and killed,
        "checks": checks,
        "seconds": round(time.monotonic() - started, 1),
        "matches": [
            {
                "sr_id": r["sr_id"],
                "title": r["title"],
                "status": r["status"],
                "exit_code": r["exit_code"],
                "events": r["events"],
                "live": r["events"] - r["backfilled"],
                "backfilled": r["backfilled"],
                "missing": r["missing"],
                "extra": r["extra"],
                "archive": r["archive"],
                "runs": r["history"],
            }
            for r in rows
        ],
    }


def _export(game: DemoGame, settings: KickoffSettings) -> str | None:
    """The game's event log written as the spec's document under DATA_DIR/exports (its path)."""
    from lifecycle.event_export import document_name, export_match
    from models.boundary import connection
    from models.match import match_by_id

    if game.match_id is None:
        return None
    out_dir = Path(settings.data_dir) / "exports"
    out_dir.mkdir(parents=True, exist_ok=True)
    with connection():
        name = document_name(match_by_id(game.match_id))
        _match, path, _count = export_match(game.match_id, out=out_dir / name)
    return str(path)


def _verify(game: DemoGame, settings: KickoffSettings) -> tuple[int | None, int | None]:
    """How many of the game's events (srsim's play-by-play) its archive lacks or holds in another
    version, or None when the play-by-play cannot be read."""
    import requests

    from listener.errors import PlayByPlayError
    from listener.play_by_play import fetch_play_by_play, play_by_play_url
    from listener.verify import compare
    from models.boundary import connection
    from models.event_log import messages_of

    url = play_by_play_url(settings, league=DEFAULT.name, sr_id=game.sr_id)
    try:
        with requests.Session() as session:
            pbp = fetch_play_by_play(
                session, url, api_key=settings.sportradar_api_key.get_secret_value(), timeout=(5.0, 10.0)
            )
    except PlayByPlayError:
        return None, None
    if game.match_id is None:
        return None, None
    with connection():
        verdict = compare(messages_of(game.match_id), pbp)
    return len(verdict.missing) + len(verdict.differing), len(verdict.extra)


def _row(game: DemoGame, settings: KickoffSettings) -> dict[str, Any]:
    from lifecycle.event_export import document_name
    from listener.events import backfilled_from
    from models.boundary import connection
    from models.event_log import messages_of
    from models.listener_record import runs_of_match
    from models.match import match_by_id

    row: dict[str, Any] = {
        "sr_id": game.sr_id,
        "title": game.title,
        "role": game.role,
        "status": "-",
        "badge": "-",
        "exit_code": None,
        "events": 0,
        "backfilled": 0,
        "missing": None,
        "extra": None,
        "delay_markers": 0,
        "history": [],
        "runs": 0,
        "open": False,
        "archive": None,
    }
    if game.match_id is None:
        return row
    with connection():
        events = messages_of(game.match_id)
        name = document_name(match_by_id(game.match_id))
        row["archive"] = f"event log ({name}: kickoff matches export {game.match_id})"
    if events:
        row["events"] = sum(1 for e in events if isinstance(e, dict) and "payload" in e)
        row["backfilled"] = sum(1 for e in events if backfilled_from(e) is not None)
        row["delay_markers"] = sum(1 for e in events if isinstance(e, dict) and "kickoff" in e)
    with connection():
        row["status"] = match_by_id(game.match_id).status
        records = runs_of_match(game.match_id)
    if records:
        last = records[-1]
        row["badge"] = str(last.badge(stale_after_seconds=settings.listener_heartbeat_stale_seconds).value)
        row["exit_code"] = last.exit_code
        row["history"] = [r.exit_code for r in records]
        row["runs"] = len(records)
        row["open"] = last.ended_at is None
    return row


def _print_board(rows: list[dict[str, Any]], out: Any, elapsed: float) -> None:
    lines = render_table(
        (f"[{elapsed:5.0f}s] game", "status", "listener", "exit", "events", "runs"),
        [
            (
                r["title"][:28],
                r["status"],
                r["badge"],
                r["exit_code"],
                r["events"],
                "[" + ",".join("…" if c is None else str(c) for c in r["history"]) + "]",
            )
            for r in rows
        ],
        empty=f"[{elapsed:5.0f}s] no games",
        right=("exit", "events"),
    )
    print("\n".join(lines), file=out, flush=True)


def _print_summary(result: dict[str, Any], out: Any) -> None:
    print(f"\nkickoff demo {'PASSED' if result['ok'] else 'FAILED'} in {result['seconds']} s", file=out)
    for name, ok in result["checks"].items():
        print(f"  [{'x' if ok else ' '}] {name}", file=out)
    for m in result["matches"]:
        print(
            f"  {m['title']}: status {m['status']}, exit {m['exit_code']}, runs {m['runs']}, "
            f"events live {m['live']} / backfilled {m['backfilled']} / missing "
            f"{'?' if m['missing'] is None else m['missing']} / extra "
            f"{'?' if m['extra'] is None else m['extra']} -> {m['archive']}",
            file=out,
        )
