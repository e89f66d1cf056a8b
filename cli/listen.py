"""``kickoff listen SR_ID``: follow one match in this process, guarded like a worker start."""

from __future__ import annotations

import sys

import click

from cli.common import MATCH_ID, echo_json, json_option
from cli.context import CliContext


@click.command("listen")
@click.argument("sr_id")
@click.option(
    "--match-id",
    "match_id",
    type=MATCH_ID,
    default=None,
    help="Log the run against this known match (internal id or sr_id) instead of SR_ID's match.",
)
@click.option("--league", default=None, help="League segment of the push URL (default: the match's league).")
@click.option(
    "--sr-env",
    type=click.Choice(["trial", "production"]),
    default=None,
    help="Access level of the feed URL (default: LISTENER_SR_ENV, trial).",
)
@click.option(
    "--process/--record-only",
    default=False,
    help="Run the processing pipeline (questions) too; by default events are only recorded.",
)
@json_option("Print the outcome as one JSON object.")
@click.pass_obj
def listen_command(
    obj: CliContext,
    sr_id: str,
    match_id: str | None,
    league: str | None,
    sr_env: str | None,
    process: bool,
    as_json: bool,
) -> None:
    """Follow the push stream of match SR_ID (the Sportradar id) until it ends; exit with its code.

    A match kickoff knows starts like a worker start: the pending start key, the start lock (token
    = the lifecycle row id), a lifecycle row with heartbeats (unless a dry run of a live match),
    the stop watch and self-fencing (exit 16 when the lock is lost). When another listener holds
    the match this prints one line naming it (host/pid of its row, or the lock token) and exits
    1 without opening a stream. The match is the one whose sr_id is SR_ID, or with --match-id
    the one named (its row, lock and heartbeats; the stream followed is still SR_ID's).
    Settings, weakest first: the environment and .env, the match's listener_start_settings,
    --league / --sr-env / --process. A known match's events go to its event log in PostgreSQL
    (as a worker's run; `kickoff matches export` writes its file). A match kickoff does not know is
    recorded to the spec's file only, with no row and no lock: its events are appended to
    DATA_DIR/listener/{league}/{shortcode}.json. Ctrl-C or SIGTERM stops the run (exit 15). The
    exit status is the listener's exit code: 13 when the match is over, 10 after too many idle
    heartbeats, 11 data error, 12 connection error.
    """
    from config.settings import load_listener_settings
    from lifecycle.errors import ListenerHeld
    from lifecycle.listen import listen

    obj.log_progress()
    settings = load_listener_settings()  # this process runs the listener: its own settings too

    try:
        result = listen(
            sr_id,
            settings=settings,
            match_id=match_id,
            league=league,
            sr_env=sr_env,
            record_only=not process,
            install_signals=True,
        )
    except ListenerHeld as exc:
        if as_json:
            echo_json(
                {
                    "sr_id": sr_id,
                    "match_id": match_id,
                    "started": False,
                    "held_by": exc.holder,
                    "detail": str(exc),
                }
            )
        else:
            click.echo(str(exc), err=True)
        sys.exit(1)
    if as_json:
        echo_json(
            {
                "sr_id": sr_id,
                "match_id": result.match_id,
                "started": True,
                "exit_code": result.exit_code,
                "reason": result.reason,
                "events": result.events,
                "archive": result.archive,
                "record_id": result.record_id,
            }
        )
    else:
        click.echo(f"exit {result.exit_code} ({result.reason}): {result.events} events -> {result.archive}")
    sys.exit(result.exit_code)
