"""``kickoff sim``: run the feed simulator (srsim) and clone recorded matches into is_test replays."""

from __future__ import annotations

import asyncio
import gc
import signal
from pathlib import Path
from typing import Any

import click

from cli.common import echo_json, json_option, reason_option, settings_option
from cli.context import CliContext

#: Path options (no default: None when not given).
A_FILE = click.Path(dir_okay=False, path_type=Path)
A_DIRECTORY = click.Path(file_okay=False, path_type=Path)


@click.group("sim")
def sim_group() -> None:
    """The feed simulator: continuous game sessions, push streams, a schedule API and league documents.

    Point listeners at it with SPORTRADAR_BASE_URL=http://HOST:PORT (the default base URL is
    srsim's default address).
    """


@sim_group.command("serve")
@click.option("--host", default=None, help="Address to bind (default SRSIM_HOST).")
@click.option("--port", type=int, default=None, help="Port to bind, 0 for any free one (default SRSIM_PORT).")
@click.option(
    "--speed", type=float, default=None, help="Speed factor: 10 plays games 10x faster (SRSIM_SPEED)."
)
@click.option(
    "--script",
    "scripts",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    multiple=True,
    help="Game script file (JSON, see docs/listener.md); repeatable. Default: three built-in games.",
)
@click.option("--heartbeat-seconds", type=float, default=None, help="Script seconds between heartbeats.")
@click.option(
    "--db/--no-db",
    "use_db",
    default=True,
    help="Write Match.status of is_test games to DATABASE_URL (srsim owns them). Default on.",
)
@click.option("--register", is_flag=True, help="Create missing is_test Match rows for the script's games.")
@click.option("--api-key", default=None, help="Refuse stream requests without this x-api-key (default: any).")
@click.option(
    "--watch-dir",
    type=A_DIRECTORY,
    help=(
        "Serve every script that appears here while running (default DATA_DIR/srsim, where"
        " `kickoff sim clone` writes); scripts already there at start are not served."
    ),
)
@click.option("--no-watch", is_flag=True, help="Serve only the --script games (no directory watch).")
@click.option(
    "--players",
    "players_file",
    type=A_FILE,
    help="Serve this players map (Sleeper's format) at /players/LEAGUE (the players' league, "
    "models.leagues.PLAYERS); read anew on every request.",
)
@click.option(
    "--leagues",
    "league_file",
    type=A_FILE,
    help=(
        "League file (JSON by league: league, conferences/divisions/teams, seasons; see"
        " docs/listener.md) served as each league's hierarchy, teams and seasons documents; read"
        " anew on every request. Leagues it does not name are built from the served games."
    ),
)
@click.option(
    "--resume/--no-resume",
    default=None,
    help=(
        "Send resume ids and replay from one on reconnect (default SRSIM_RESUME, on); --no-resume"
        " models a feed without resume."
    ),
)
@click.option(
    "--resume-window",
    "resume_window",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Refuse (410) a resume from a message sent longer ago (default SRSIM_RESUME_WINDOW_SECONDS, 600).",
)
@click.option(
    "--stamp-sends",
    is_flag=True,
    help=(
        'Add "srsim_sent_at" (Unix seconds) to every event frame when it is written: benchmarks'
        " measure from the send, not from the script's schedule."
    ),
)
@click.pass_obj
def serve(
    obj: CliContext,
    host: str | None,
    port: int | None,
    speed: float | None,
    scripts: tuple[Path, ...],
    heartbeat_seconds: float | None,
    use_db: bool,
    register: bool,
    api_key: str | None,
    watch_dir: Path | None,
    no_watch: bool,
    players_file: Path | None,
    league_file: Path | None,
    resume: bool | None,
    resume_window: float | None,
    stamp_sends: bool,
) -> None:
    """Serve every game's session until Ctrl-C / SIGTERM.

    A session's clock starts with the server and runs whether or not anyone listens. The first
    line printed is `srsim listening on http://HOST:PORT`; then one line per session. Each game
    also answers its play-by-play (`.../games/{sr_id}/pbp.json`), and a stream reconnecting
    with `&resume_id=ID` gets what it missed replayed (see docs/listener.md).
    """
    obj.log_progress()
    from srsim.script import demo_games, load_script
    from srsim.server import SimServer

    s = obj.settings
    games = [g for path in scripts for g in load_script(path)] if scripts else demo_games()
    writer = None
    speed = speed or s.srsim_speed
    if use_db:
        from srsim.matches import register_test_matches
        from srsim.status import StatusWriter

        obj.database()
        if register:
            register_test_matches(games, speed=speed)
        writer = StatusWriter()
    server = SimServer(
        games,
        host=host or s.srsim_host,
        port=s.srsim_port if port is None else port,
        speed=speed,
        heartbeat_seconds=heartbeat_seconds or s.srsim_heartbeat_seconds,
        api_key=api_key,
        status_writer=writer,
        watch_dir=None if no_watch else (watch_dir or s.data_dir / "srsim"),
        watch_seconds=s.srsim_watch_seconds,
        players_file=players_file,
        league_file=league_file,
        resume=s.srsim_resume if resume is None else resume,
        resume_window_seconds=resume_window or s.srsim_resume_window_seconds,
        stamp_sends=stamp_sends,
    )

    # Every game's session (its script's lines and times, built above) lives as long as the process:
    # kept out of the collector's full passes, which otherwise visit every line of every script, every
    # stream of the process stopped meanwhile (2,500 games: 86-215 ms of CPU a pass, 37-181 ms with
    # the sessions frozen; docs/scaling.md).
    gc.freeze()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.create_task(server.serve())
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, server.stop_soon)
        while not server.ready:
            await asyncio.sleep(0.01)
            if task.done():
                return await task
        click.echo(f"srsim listening on {server.base_url}", nl=True)
        if server.watch_dir is not None:
            click.echo(f"  serving new scripts in {server.watch_dir}")
        for sess in list(server.sessions.values())[:20]:
            g = sess.game
            click.echo(f"  {g.league} {g.sr_id} {g.title!r} is_test={g.is_test} events={len(sess.lines)}")
        if len(server.sessions) > 20:
            click.echo(f"  ... and {len(server.sessions) - 20} more sessions")
        await task

    try:
        asyncio.run(main())
    finally:
        if writer is not None:
            writer.close()


@sim_group.command("clone")
@click.argument("match_ref", metavar="MATCH_ID")
@click.option("--out", type=A_FILE, help="Script file to write.")
@click.option(
    "--start-after", type=float, default=10.0, show_default=True, help="Script seconds before kick-off."
)
@click.option(
    "--event-interval", type=float, default=2.0, show_default=True, help="Script seconds per event."
)
@settings_option(
    "Listener setting of the clone (its Match.listener_start_settings), e.g."
    " listener_force_exit_code=11; checked against the listener settings; repeatable."
)
@reason_option(required=False)
@json_option("Print the result as one JSON object.")
@click.pass_obj
def clone(
    obj: CliContext,
    match_ref: str,
    out: Path | None,
    start_after: float,
    event_interval: float,
    settings_: dict[str, Any],
    reason: str | None,
    as_json: bool,
) -> None:
    """Turn recorded match MATCH_ID (its internal id or sr_id) into an is_test clone and an srsim script.

    Creates a new is_test Match (new sr_id) and writes the script (default
    DATA_DIR/srsim/{new sr_id}.json). A running `kickoff sim serve` watching DATA_DIR/srsim serves
    it within SRSIM_WATCH_SECONDS, no restart needed; with --out elsewhere, serve it with
    `kickoff sim serve --script FILE`. The clone is not dispatched until an srsim serves it.
    The script replays the game as it finally was: each event of its event log once, in its current
    state (corrections folded in, deleted events left out).
    """
    from lifecycle.clone import clone_match
    from models.audit import AuditContext

    obj.database()
    match, path, count = clone_match(
        match_ref,
        data_dir=obj.settings.data_dir,
        out=out,
        start_after=start_after,
        event_interval=event_interval,
        settings=settings_,
        audit=AuditContext(obj.actor, reason),
    )
    if as_json:
        echo_json(
            {
                "match_id": str(match.id),
                "sr_id": match.sr_id,
                "script": str(path),
                "events": count,
                "settings": settings_,
            }
        )
    else:
        click.echo(f"is_test clone {match.sr_id} (match {match.id}): {count} events -> {path}")
        click.echo("dispatchable once an srsim serves it (a running `kickoff sim serve` picks it up)")
