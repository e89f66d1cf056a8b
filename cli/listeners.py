"""``kickoff listeners``: dispatch, start, stop, sweep and status of match listeners.

dispatch, stop and sweep run here, in the CLI process (they print exactly what they did);
start enqueues a start_match_listener message for the listener worker.
"""

from __future__ import annotations

from typing import Any

import click

from cli.common import MATCH_ID, echo_json, parse_assignments
from cli.context import CliContext


def _send_start() -> Any:
    """The Dramatiq sender of start messages (imports actors: the broker is set up from settings)."""
    from actors.listeners import send_start

    return send_start


def _send_starts() -> Any:
    """The batch sender of start messages (one Redis round trip per dispatch)."""
    from actors.listeners import send_starts

    return send_starts


@click.group("listeners")
def listeners() -> None:
    """Operate match listeners. MATCH_ID is the internal Match.id (UUID), not the sr_id.

    \b
    Listener back after a hard fail: wait for Abandoned + the next dispatch, or `start --force`.
    Listener down and stay down:     `stop` (turns auto-dispatch off).
    Auto-start again after a stop:   `kickoff matches set-dispatch MATCH_ID on`, or `start`.
    """


@listeners.command("dispatch")
@click.option(
    "--within-minutes",
    type=click.IntRange(min=0),
    default=None,
    help="Window after now for pre-game matches (default: LISTENER_DISPATCH_WITHIN_MINUTES).",
)
@click.option("--test", "which", flag_value="test", help="Test clones only (as develop's scheduler).")
@click.option("--live", "which", flag_value="live", help="Live matches only.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def dispatch_cmd(obj: CliContext, within_minutes: int | None, which: str | None, as_json: bool) -> None:
    """Run one dispatch now: enqueue a start for every match that needs a listener."""
    from listener.dispatch import dispatch_upcoming_match_listeners

    obj.database()
    is_test = {"test": True, "live": False}.get(which or "")
    result = dispatch_upcoming_match_listeners(
        within_minutes=within_minutes,
        is_test=is_test,
        settings=obj.settings,
        barriers=obj.barriers,
        send=_send_start(),
    )
    if as_json:
        echo_json(result.as_dict())
        return
    if result.locked:
        click.echo("dispatch skipped: another dispatch is running")
        return
    click.echo(
        f"dispatch: {result.enqueued} enqueued, {result.skipped} already pending, "
        f"{result.exhausted} exhausted, {result.abandoned} stale rows abandoned ({result.eligible} eligible)"
    )
    for match_id in result.match_ids:
        click.echo(f"  enqueued {match_id}")


@listeners.command("start")
@click.argument("match_id", type=MATCH_ID)
@click.option(
    "--force",
    is_flag=True,
    help="Clear pending/attempts/exhausted/stop flag and skip the open-row guard. "
    "Never stops or doubles a live listener (stop it first).",
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Listener setting for this start only (strongest layer); repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def start_cmd(obj: CliContext, match_id: str, force: bool, overrides: tuple[str, ...], as_json: bool) -> None:
    """Enqueue a start of MATCH_ID's listener on the match_listeners queue."""
    from listener.dispatch import request_start
    from listener.start import load_match, validate_override_keys

    parsed = parse_assignments(overrides, option="--override")
    validate_override_keys(parsed, source="--override")
    obj.database()
    load_match(match_id)
    message, note = request_start(
        match_id, overrides=parsed or None, force=force, barriers=obj.barriers, send=_send_start()
    )
    if as_json:
        echo_json(
            {
                "match_id": match_id,
                "enqueued": message is not None,
                "message_id": message.message_id if message else None,
                "force": force,
                "detail": note,
            }
        )
    else:
        click.echo(note)


@listeners.command("stop")
@click.argument("match_id", type=MATCH_ID)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def stop_cmd(obj: CliContext, match_id: str, as_json: bool) -> None:
    """Stop MATCH_ID's listener (exit 15 within 2 s), revoke a queued start, turn auto-dispatch off."""
    from listener.cleanup import stop_match_listener

    obj.database()
    result = stop_match_listener(match_id, settings=obj.settings, barriers=obj.barriers)
    if as_json:
        echo_json(result.as_dict())
        return
    revoked = f", revoked {result.revoked_message_id}" if result.revoked_message_id else ""
    click.echo(
        f"match {match_id}: stopped: {result.rows_closed} rows closed with 15{revoked}; "
        f"barriers cleared; auto-dispatch off"
    )


@listeners.command("sweep")
@click.option(
    "--heartbeat-stale-seconds",
    type=click.FloatRange(min=0),
    default=None,
    help="Threshold (default LISTENER_HEARTBEAT_STALE_SECONDS); 0 abandons every open row.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def sweep_cmd(obj: CliContext, heartbeat_stale_seconds: float | None, as_json: bool) -> None:
    """Close open rows with a stale heartbeat as Abandoned (14) and clear their barriers."""
    from listener.cleanup import sweep_stale_match_listeners

    obj.database()
    result = sweep_stale_match_listeners(
        heartbeat_stale_seconds=heartbeat_stale_seconds, settings=obj.settings, barriers=obj.barriers
    )
    if as_json:
        echo_json(result.as_dict())
    elif result.locked:
        click.echo("sweep skipped: another sweep is running")
    else:
        click.echo(
            f"sweep: {result.abandoned} rows abandoned (14) on {len(result.matches)} matches; "
            f"barriers cleared on {len(result.barriers_cleared)}"
        )


@listeners.command("status")
@click.option("--match", "match_id", type=MATCH_ID, default=None, help="Only this match.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of objects.")
@click.pass_obj
def status_cmd(obj: CliContext, match_id: str | None, as_json: bool) -> None:
    """One line per match with a listener history: badge and exit of its latest run, barriers."""
    from listener.status import listener_status

    obj.database()
    rows = listener_status(settings=obj.settings, barriers=obj.barriers, match_id=match_id)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no listener runs")
        return
    click.echo(
        f"{'match_id':<36}  {'sr_id':<24} {'badge':<9} {'exit':>4} {'hb_age_s':>8} {'att':>3} "
        f"{'exh':<3} dispatch"
    )
    for r in rows:
        exit_code = "" if r["exit_code"] is None else r["exit_code"]
        age = "" if r["heartbeat_age_s"] is None else f"{r['heartbeat_age_s']:.0f}"
        click.echo(
            f"{r['match_id']:<36}  {r['sr_id']:<24} {r['badge']:<9} {exit_code!s:>4} {age:>8} "
            f"{r['attempts']:>3} {'yes' if r['exhausted'] else 'no':<3} "
            f"{'on' if r['auto_dispatch'] else 'off'}"
        )
