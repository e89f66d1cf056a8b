"""``kickoff listeners``: dispatch, start, stop, sweep, bulk and status of match listeners.

dispatch, stop, sweep and bulk run here, in the CLI process (they print exactly what they did);
start enqueues a start_match_listener message for the listener worker.
"""

from __future__ import annotations

from typing import Any

import click

from cli.common import (
    LIMIT_OPTION,
    MATCH_ID,
    count_option,
    echo_json,
    json_option,
    parse_assignments,
    reason_option,
)
from cli.context import CliContext


def _send_backfill() -> Any:
    """The Dramatiq sender of archive backfills (imports actors, as ``_send_start``)."""
    from actors.archive import send_backfill

    return send_backfill


def _send_start() -> Any:
    """The Dramatiq sender of start messages (imports actors: the broker is set up from settings)."""
    from actors.listeners import send_start

    return send_start


@click.group("listeners")
def listeners() -> None:
    """Operate match listeners. MATCH_ID is the internal Match.id or, failing that, the match's sr_id.

    \b
    Listener back after a hard fail: wait for Abandoned + the next dispatch, or
                                     `start --force --reason TEXT`.
    Listener down and stay down:     `stop --reason TEXT` (turns auto-dispatch off).
    Auto-start again after a stop:   `kickoff matches set-dispatch MATCH_ID on`, or `start`.
    Many matches at once:            `bulk ACTION --league L [--status S] [--badge B] --reason TEXT`.
    """


@listeners.command("dispatch")
@count_option(
    "--within-minutes",
    default=0,  # lifecycle.dispatch.MANUAL_WITHIN_MINUTES (not imported: --help stays fast)
    minimum=0,
    help=(
        "Window after now for pre-game matches (a one-shot's default is 0: matches due now;"
        " the scheduler's ticks use LISTENER_DISPATCH_WITHIN_MINUTES)."
    ),
)
@click.option("--test", "test_only", is_flag=True, help="Test clones only (as develop's scheduler).")
@click.option("--live", "live_only", is_flag=True, help="Live matches only (not with --test).")
@reason_option(required=False)
@json_option(
    'Print {"locked", "eligible", "enqueued", "skipped", "exhausted", "abandoned", "failed", "match_ids",'
    ' "set_aside": [{"item", "reason"}]}.'
)
@click.pass_obj
def dispatch_cmd(
    obj: CliContext, within_minutes: int, test_only: bool, live_only: bool, reason: str | None, as_json: bool
) -> None:
    """Run one dispatch now: enqueue a start for every match that needs a listener.

    Prints the counts (enqueued, already pending, exhausted, abandoned), each enqueued match and
    each match set aside with its reason (stored settings its start would refuse; nothing is sent).
    """
    from lifecycle.dispatch import audit_dispatch, dispatch_upcoming_match_listeners
    from models.audit import AuditContext

    if test_only and live_only:
        raise click.UsageError("--test and --live contradict each other: give one or neither")

    obj.database()
    is_test = True if test_only else (False if live_only else None)
    audit_dispatch(AuditContext(obj.actor, reason), within_minutes=within_minutes, is_test=is_test)
    result = dispatch_upcoming_match_listeners(
        within_minutes=within_minutes,
        is_test=is_test,
        settings=obj.settings,
        coordination=obj.coordination,
        send=_send_start(),
    )
    if as_json:
        echo_json(result.as_dict())
        return
    click.echo(result.summary())
    if result.locked:
        return
    for match_id in result.match_ids:
        click.echo(f"  enqueued {match_id}")
    for entry in result.set_aside:
        click.echo(f"  set aside {entry['item']}: {entry['reason']}")


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
@reason_option(required=False, help="Why (required with --force; kept in the audit log).")
@json_option(
    'Print {"match_id", "enqueued", "message_id", "force", "detail"} (exhausted: also "exhausted": true, '
    '"status": "conflict", "error").'
)
@click.pass_obj
def start_cmd(
    obj: CliContext, match_id: str, force: bool, overrides: tuple[str, ...], reason: str | None, as_json: bool
) -> None:
    """Enqueue a start of MATCH_ID's listener on the match_listeners queue; prints the message id.

    --override values are checked against the listener settings first: a bad one is one line and
    nothing is enqueued. A start already queued or running is not enqueued again (exit 0). A match
    whose start attempts are exhausted is a conflict (exit 4, nothing enqueued): start it with
    --force. A forced start needs --reason (kept in the audit log).
    """
    from cli.answers import answer_and_exit
    from lifecycle.dispatch import request_start
    from lifecycle.errors import StartAttemptsExhausted
    from lifecycle.listener_run import load_match_with_league, validate_listener_settings
    from models.audit import AuditContext

    if force and not reason:
        raise click.UsageError("start --force needs --reason TEXT (it goes into the audit log)")
    parsed = parse_assignments(overrides, option="--override")
    validate_listener_settings(parsed, source="--override")
    obj.database()
    load_match_with_league(match_id)
    data: dict[str, Any] = {"match_id": match_id, "enqueued": False, "message_id": None, "force": force}
    try:
        message, note = request_start(
            match_id,
            overrides=parsed or None,
            force=force,
            coordination=obj.coordination,
            send=_send_start(),
            audit=AuditContext(obj.actor, reason),
        )
    except StartAttemptsExhausted as exc:
        answer_and_exit(exc, as_json=as_json, data={**data, "exhausted": True, "detail": str(exc)})
    if as_json:
        data.update(enqueued=message is not None, message_id=message.message_id if message else None)
        echo_json({**data, "detail": note})
    else:
        click.echo(note)


@listeners.command("stop")
@click.argument("match_id", type=MATCH_ID)
@reason_option(required=True)
@json_option(
    'Print {"match_id", "rows_closed", "revoked_message_id", "locks_released", "auto_dispatch_was"}.'
)
@click.pass_obj
def stop_cmd(obj: CliContext, match_id: str, reason: str | None, as_json: bool) -> None:
    """Stop MATCH_ID's listener (exit 15 within 2 s), revoke a queued start, turn auto-dispatch off.

    --reason is required: the stop, its reason and who ran it go into the audit log.
    """
    from lifecycle.cleanup import stop_match_listener
    from models.audit import AuditContext

    obj.database()
    result = stop_match_listener(
        match_id, settings=obj.settings, coordination=obj.coordination, audit=AuditContext(obj.actor, reason)
    )
    if as_json:
        echo_json(result.as_dict())
        return
    revoked = f", revoked {result.revoked_message_id}" if result.revoked_message_id else ""
    click.echo(
        f"match {match_id}: stopped: {result.rows_closed} rows closed with 15{revoked}; "
        f"barriers cleared; auto-dispatch off"
    )


#: lifecycle.bulk.ACTIONS (not imported: --help stays fast; a unit test compares them).
BULK_ACTIONS = ("stop", "start", "force-start", "dispatch-on", "dispatch-off")


@listeners.command("bulk")
@click.argument("action", type=click.Choice(BULK_ACTIONS), metavar="ACTION")
@click.option("--league", default=None, help="Matches of this league (case-insensitive).")
@click.option("--status", default=None, help="Only matches with this match status (e.g. inprogress).")
@click.option(
    "--badge", default=None, help='Only matches whose board badge is this (Running, Stale, ..., "-").'
)
@click.option(
    "--match", "match_refs", multiple=True, metavar="ID", help="Only this match (id or sr_id); repeatable."
)
@reason_option(required=True)
@click.option("--yes", is_flag=True, help="Act without asking (after showing the preview).")
@click.option("--dry-run", is_flag=True, help="Show the preview only; change nothing.")
@json_option(
    'Print {"action", "count", "failed", "match_ids", "results": [{"match_id", "ok", "detail"}]}; with'
    ' --dry-run the preview {"action", "filter", "count", "match_ids", "matches"}. Needs --yes or --dry-run.'
)
@click.pass_obj
def bulk_cmd(
    obj: CliContext,
    action: str,
    league: str | None,
    status: str | None,
    badge: str | None,
    match_refs: tuple[str, ...],
    reason: str | None,
    yes: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """ACTION (stop, start, force-start, dispatch-on, dispatch-off) on every match of a filter.

    The filter is --league and/or --match, narrowed by --status and --badge (the board's). The
    preview (count and matches) is shown first and the command asks before acting (--yes does not
    ask); it then acts on exactly the previewed matches, each on its own, each act audited with
    --reason, plus one `listeners.bulk` entry. Exit codes: 0 every match done (or none matched,
    or --dry-run); 1 some match refused (its line says why) or the question answered no; 2 usage
    error, unknown league or match; 3 a filter or action refused (no reason, nothing to select);
    4 more than 500 matches, or the preview expired (300 s) before the answer.
    """
    from cli.answers import answer_and_exit
    from lifecycle.bulk import bulk_filter, preview_bulk, run_bulk
    from lifecycle.errors import BulkConflict, BulkInvalid

    if as_json and not (yes or dry_run):
        raise click.UsageError("--json needs --yes or --dry-run (a script cannot answer the question)")
    obj.database()
    flt = bulk_filter(league=league, status=status, badge=badge, match_ids=match_refs)
    try:
        preview = preview_bulk(
            action,
            flt,
            settings=obj.settings,
            coordination=obj.coordination,
            actor=obj.actor,
            reason=reason,
            keep=not dry_run,
        )
    except (BulkInvalid, BulkConflict) as exc:
        answer_and_exit(exc, as_json=as_json)  # invalid (3) or conflict (4), by kind
    if as_json and (dry_run or preview.confirm is None):
        data = preview.as_dict()
        echo_json({k: data[k] for k in ("action", "filter", "count", "match_ids", "matches")})
        return
    if not as_json:
        click.echo(f"bulk {action}: {len(preview.matches)} matches")
        for m in preview.matches:
            click.echo(f"  {m.match_id}  {m.sr_id}  {m.title or '-'}  {m.league}  {m.status}  {m.badge}")
    if dry_run or preview.confirm is None:
        if not preview.matches and not as_json:
            click.echo("no match fits the filter: nothing to do")
        return
    if not yes:
        click.confirm(f"{action} these {len(preview.matches)} matches?", abort=True)
    try:
        outcome = run_bulk(
            action,
            flt,
            preview.confirm,
            settings=obj.settings,
            coordination=obj.coordination,
            send=_send_start() if action in ("start", "force-start") else None,
            actor=obj.actor,
            reason=reason,
        )
    except BulkConflict as exc:
        answer_and_exit(exc, as_json=as_json)
    if as_json:
        echo_json({**outcome.as_dict(), "match_ids": preview.match_ids})
    else:
        for r in outcome.results:
            named = f" ({r.title})" if r.title else ""
            click.echo(f"  {'ok    ' if r.ok else 'failed'}  {r.match_id}{named}: {r.detail}")
        click.echo(f"bulk {action}: {len(outcome.results) - outcome.failed} done, {outcome.failed} failed")
    if outcome.failed:
        raise click.exceptions.Exit(1)


@listeners.command("sweep")
@click.option(
    "--heartbeat-stale-seconds",
    type=click.FloatRange(min=0),
    default=None,
    help=(
        "Heartbeat threshold (default LISTENER_HEARTBEAT_STALE_SECONDS). 0 abandons every open row,"
        " healthy or not: a last resort, never needed after a deploy."
    ),
)
@reason_option(required=False)
@json_option(
    'Print {"locked", "abandoned", "matches", "barriers_cleared", "pending_reclaimed", "locks_released",'
    ' "backfills", "set_aside"}.'
)
@click.pass_obj
def sweep_cmd(
    obj: CliContext, heartbeat_stale_seconds: float | None, reason: str | None, as_json: bool
) -> None:
    """Close dead listeners' rows as Abandoned (14) and clear their barriers.

    A listener is dead when its worker's lease is gone from Redis or its heartbeat is older than
    the threshold; a healthy one is never closed with the default threshold. A row or match whose
    clean-up fails is set aside with its reason (one line each) and the sweep goes on. A match
    whose game is over when its last run is abandoned gets one archive backfill enqueued
    (backfill_match_archive, as `kickoff matches backfill`).
    """
    from lifecycle.cleanup import audit_sweep, sweep_stale_match_listeners
    from models.audit import AuditContext

    obj.database()
    audit_sweep(AuditContext(obj.actor, reason), heartbeat_stale_seconds=heartbeat_stale_seconds)
    result = sweep_stale_match_listeners(
        heartbeat_stale_seconds=heartbeat_stale_seconds,
        settings=obj.settings,
        coordination=obj.coordination,
        send_backfill=_send_backfill(),
    )
    if as_json:
        echo_json(result.as_dict())
    elif result.locked:
        click.echo("sweep skipped: another sweep is running")
    else:
        click.echo(
            f"sweep: {result.abandoned} rows abandoned (14) on {len(result.matches)} matches; "
            f"barriers cleared on {len(result.barriers_cleared)}; {len(result.set_aside)} set aside"
            + (f"; archive backfill enqueued for {', '.join(result.backfills)}" if result.backfills else "")
        )
        for item in result.set_aside:
            click.echo(
                f"  set aside at {item.step}: match {item.match_id or '-'} row {item.record_id or '-'}: "
                f"{item.reason}"
            )


@listeners.command("status")
@click.option(
    "--match", "match_id", type=MATCH_ID, default=None, help="Only this match (shown even with no run)."
)
@click.option("--active", is_flag=True, help="Only matches with an open run or a pending start.")
@click.option(
    "--watch",
    "watch_seconds",
    type=click.FloatRange(min=0.5),
    is_flag=False,
    flag_value=2.0,
    default=None,
    metavar="[SECONDS]",
    help="Redraw the board every SECONDS (default 2) until Ctrl-C.",
)
@LIMIT_OPTION
@json_option('Print one JSON object: {"at", "count", "matches": [...]}.')
@click.pass_obj
def status_cmd(
    obj: CliContext,
    match_id: str | None,
    active: bool,
    watch_seconds: float | None,
    limit: int,
    as_json: bool,
) -> None:
    """The listener board: every match with a run, attempts, exhausted, pending or a stop.

    A match is listed when it has a lifecycle row, an attempt counter, an exhausted flag, a
    pending start or a stop flag, or when auto-dispatch is off (e.g. by a stop) for a match
    dispatch would otherwise start: a match stopped while its start was queued shows badge "-"
    and dispatch off.

    \b
    badge    the newest run (an open row wins over a later closed one): Running, Late (heartbeat
             older than two intervals), Stale (older than the stale threshold), Abandoned (14),
             Stopped (15), Ended (any other exit); "-" when the match has no run
    exit     exit code of a closed run; reason: its closing reason (e.g. "HTTP 404",
             "heartbeat stale", "stopped by operator")
    hb_age_s heartbeat age of an open run; att/exh: failed starts / attempt cap reached;
             pend: a start is queued or running; dispatch: auto-dispatch on/off
    """
    from cli.board import render_board, watch
    from config.clock import utcnow
    from lifecycle.board import listener_board

    obj.database()

    def draw() -> None:
        entries = listener_board(
            settings=obj.settings, coordination=obj.coordination, match_id=match_id, active_only=active
        )[:limit]
        at = utcnow().isoformat(timespec="seconds")
        if as_json:
            echo_json({"at": at, "count": len(entries), "matches": [e.as_dict() for e in entries]})
            return
        if watch_seconds is not None:
            click.echo(f"listener board at {at} (every {watch_seconds:g} s; Ctrl-C to stop)")
        for line in render_board(entries):
            click.echo(line)

    if watch_seconds is None:
        draw()
    else:
        watch(draw, seconds=watch_seconds)
