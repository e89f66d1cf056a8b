"""``kickoff listen SR_ID``: follow one match in this process, without workers (record-only by default)."""

from __future__ import annotations

import sys

import click

from cli.common import echo_json
from cli.context import CliContext


@click.command("listen")
@click.argument("sr_id")
@click.option("--league", default=None, help="League segment of the push URL (default: the match's league).")
@click.option(
    "--process/--record-only",
    default=False,
    help="Run the processing pipeline (questions) too; by default events are only recorded.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON object.")
@click.pass_obj
def listen_command(obj: CliContext, sr_id: str, league: str | None, process: bool, as_json: bool) -> None:
    """Follow the push stream of match SR_ID (the Sportradar id) until it ends; exit with its code.

    Settings come from the environment and .env only (SPORTRADAR_BASE_URL, SPORTRADAR_API_KEY,
    LISTENER_* ...). Events are appended to DATA_DIR/listener/{league}/{shortcode}.json. When the
    match has a row in the database a lifecycle row is written (unless LISTENER_DRY_RUN). Ctrl-C
    or SIGTERM stops the run (exit 15). The exit status is the listener's exit code: 13 when the
    match is over, 10 after too many idle heartbeats, 11 data error, 12 connection error.
    """
    from listener.listen import listen

    result = listen(
        sr_id, settings=obj.settings, league=league, record_only=not process, install_signals=True
    )
    if as_json:
        echo_json(
            {
                "sr_id": sr_id,
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
