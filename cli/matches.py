"""``kickoff matches``: add, list, show and edit matches, turn a match's auto-dispatch on or off."""

from __future__ import annotations

from typing import Any

import click

from cli.answers import EXIT_OF
from cli.common import (
    LIMIT_OPTION,
    MATCH_ID,
    count_option,
    echo_answer,
    echo_json,
    json_option,
    reason_option,
    settings_option,
)
from cli.context import CliContext
from cli.table import echo_table, render_table
from config.errors import ErrorKind


@click.group("matches")
def matches() -> None:
    """Matches the dispatcher may start listeners for (MATCH_ID: the internal UUID or the sr_id)."""


@matches.command("add")
@click.option("--league", required=True, help="League name (must exist: kickoff leagues add).")
@click.option("--sr-id", required=True, help="The provider's match id (Match.sr_id).")
@click.option("--scheduled", required=True, help="Start time, ISO 8601 with an offset (Z accepted).")
@click.option("--status", default="scheduled", show_default=True, help="Initial Match.status.")
@click.option("--title", default=None, help="Optional display title.")
@click.option("--test", "is_test", is_flag=True, help="An is_test clone (simulator-owned status).")
@click.option("--no-auto-dispatch", is_flag=True, help="Create with auto-dispatch off.")
@settings_option("Per-match listener setting (Match.listener_start_settings); repeatable.")
@json_option('Print {"id": ...}.')
@click.pass_obj
def add(
    obj: CliContext,
    league: str,
    sr_id: str,
    scheduled: str,
    status: str,
    title: str | None,
    is_test: bool,
    no_auto_dispatch: bool,
    settings_: dict[str, Any],
    as_json: bool,
) -> None:
    """Add a match; prints its internal id."""
    from config.clock import parse_iso8601
    from lifecycle.listener_run import validate_listener_settings
    from lifecycle.match_admin import add_match
    from models.status import normalise

    when = parse_iso8601(scheduled, what="--scheduled")
    normalised = normalise(status)
    if normalised is None:
        raise click.BadParameter(f"unknown status {status!r}", param_hint="--status")
    validate_listener_settings(settings_, source="--setting")
    obj.database()
    match = add_match(
        league=league,
        sr_id=sr_id,
        scheduled=when,
        status=normalised,
        title=title,
        is_test=is_test,
        auto_dispatch=not no_auto_dispatch,
        settings=settings_,
        audit=obj.audit(),
    )
    echo_answer(as_json, {"id": str(match.id)}, str(match.id))


@matches.command("list")
@LIMIT_OPTION
@json_option('Print {"matches": [{"id", "sr_id", "title", "badge", ...}]}.')
@click.pass_obj
def list_(obj: CliContext, limit: int, as_json: bool) -> None:
    """List matches by start time, each with its listener badge (as `kickoff listeners status`).

    A table: id, sr_id, title, league, scheduled, status, badge, flags (test, dispatch-off).
    """
    from lifecycle.board import listener_board
    from models.match import matches_by_start

    obj.database()
    rows = [
        {
            "id": str(m.id),
            "sr_id": m.sr_id,
            "title": m.title,
            "league": m.league.name,
            "scheduled": m.scheduled.isoformat(),
            "status": m.status,
            "is_test": m.is_test,
            "auto_dispatch": m.auto_dispatch_listener,
        }
        for m in matches_by_start(limit)
    ]
    board = listener_board(
        settings=obj.settings, coordination=obj.coordination, match_ids=[r["id"] for r in rows]
    )
    badges = {e.match_id: e.badge for e in board}
    for r in rows:
        r["badge"] = badges.get(r["id"], "-")
    if as_json:
        echo_json({"matches": rows})
        return
    echo_table(
        ["id", "sr_id", "title", "league", "scheduled", "status", "badge", "flags"],
        (
            [
                r["id"],
                r["sr_id"],
                r["title"] or "-",
                r["league"],
                r["scheduled"],
                r["status"],
                r["badge"],
                " ".join(
                    f
                    for f in ("test" if r["is_test"] else "", "" if r["auto_dispatch"] else "dispatch-off")
                    if f
                ),
            ]
            for r in rows
        ),
        empty="no matches (kickoff matches add ...)",
    )


@matches.command("show")
@click.argument("match_id", type=MATCH_ID)
@count_option("--runs", "runs_limit", default=20, help="Newest runs shown.")
@json_option('Print {"id", "sr_id", ..., "runs": [...], "barriers", "archive", "timeline": [...]}.')
@click.pass_obj
def show(obj: CliContext, match_id: str, runs_limit: int, as_json: bool) -> None:
    """Show MATCH_ID: its fields, per-match listener settings, newest runs, Redis barriers and one
    timeline of its runs (with their gaps) and the operator acts the audit log holds for it."""
    from lifecycle.board import gaps_cell
    from lifecycle.match_admin import match_detail

    obj.database()
    d = match_detail(match_id, settings=obj.settings, coordination=obj.coordination, runs_limit=runs_limit)
    if as_json:
        echo_json(d)
        return
    for key in ("id", "sr_id", "league", "title", "scheduled", "status", "is_test", "auto_dispatch", "badge"):
        click.echo(f"{key + ':':<15}{'' if d[key] is None else d[key]}")
    if d["degraded"]:
        click.echo(f"{'degraded:':<15}yes (the run's event log writing is behind)")
    b = d["barriers"]
    click.echo(
        f"{'barriers:':<15}pending={'yes' if b['pending'] else 'no'} attempts={b['attempts']} "
        f"exhausted={'yes' if b['exhausted'] else 'no'} stop_flag={'yes' if b['stop_flag'] else 'no'} "
        f"lock_holder={b['lock_holder'] or '-'}"
    )
    events = d["archive"]["events"]
    held = "none yet" if events is None else f"{events} events"
    click.echo(f"{'archive:':<15}{d['archive']['path']} ({held})")
    click.echo(f"{'verification:':<15}{verification_text(d['archive'])}")
    settings = ", ".join(f"{k}={v}" for k, v in sorted(d["settings"].items())) or "(none)"
    click.echo(f"{'settings:':<15}{settings}")
    click.echo("runs:")
    for line in render_table(
        ["record_id", "started_at", "ended_at", "exit", "gaps", "reason", "host", "pid"],
        (
            [
                r["record_id"],
                r["started_at"],
                r["ended_at"],
                r["exit_code"],
                gaps_cell(
                    r["gaps"],
                    r["gap_seconds"],
                    r["events_backfilled"],
                    r["gaps_unrecovered"],
                    r["events_unrecovered"],
                ),
                r["reason"],
                r["host"],
                r["pid"],
            ]
            for r in d["runs"]
        ),
        empty="no runs",
        right=["exit", "pid"],
    ):
        click.echo(f"  {line}")
    click.echo("timeline:")
    for t in d["timeline"] or [{"at": "", "what": "nothing yet"}]:
        who = f" by {t['who']}" if t.get("who") else ""
        reason = f": {t['reason']}" if t.get("reason") else ""
        click.echo(f"  {t['at']}  {t['what']}{who}{reason}")


@matches.command("edit")
@click.argument("match_id", type=MATCH_ID)
@click.option("--title", default=None, help="New display title.")
@click.option("--scheduled", default=None, help="New start time, ISO 8601 with an offset.")
@click.option("--status", default=None, help="New Match.status (checked against the status vocabulary).")
@settings_option("Set a per-match listener setting.")
@click.option("--unset", "unset", multiple=True, metavar="KEY", help="Remove a per-match listener setting.")
@reason_option(required=False)
@json_option('Print {"match_id", "changed": {...}}.')
@click.pass_obj
def edit(
    obj: CliContext,
    match_id: str,
    title: str | None,
    scheduled: str | None,
    status: str | None,
    settings_: dict[str, Any],
    unset: tuple[str, ...],
    reason: str | None,
    as_json: bool,
) -> None:
    """Edit MATCH_ID's title, start time, status or listener settings; prints what changed.

    Settings are checked as `matches add --setting`: a bad one is one line and nothing is saved.
    A running listener keeps the settings it started with.
    """
    from config.clock import parse_iso8601
    from lifecycle.match_admin import edit_match
    from models.audit import AuditContext
    from models.status import normalise

    when = parse_iso8601(scheduled, what="--scheduled") if scheduled is not None else None
    if status is not None and normalise(status) is None:
        raise click.BadParameter(f"unknown status {status!r}", param_hint="--status")
    obj.database()
    changed = edit_match(
        match_id,
        title=title,
        scheduled=when,
        status=status,
        set_settings=settings_,
        unset_settings=list(unset),
        audit=AuditContext(obj.actor, reason),
    )
    if as_json:
        echo_json({"match_id": match_id, "changed": changed})
    elif changed:
        click.echo(f"match {match_id}: " + ", ".join(f"{k}={v}" for k, v in changed.items()))
    else:
        click.echo(f"match {match_id}: nothing changed")


@matches.command("set-dispatch")
@click.argument("match_id", type=MATCH_ID)
@click.argument("state", type=click.Choice(["on", "off"]))
@reason_option(required=False)
@json_option('Print {"match_id", "auto_dispatch", "was"}.')
@click.pass_obj
def set_dispatch(obj: CliContext, match_id: str, state: str, reason: str | None, as_json: bool) -> None:
    """Turn auto-dispatch of MATCH_ID on or off (on also clears a leftover stop flag)."""
    from lifecycle.cleanup import set_auto_dispatch
    from models.audit import AuditContext

    obj.database()
    before = set_auto_dispatch(
        match_id, state == "on", coordination=obj.coordination, audit=AuditContext(obj.actor, reason)
    )
    data = {"match_id": match_id, "auto_dispatch": state == "on", "was": before}
    echo_answer(as_json, data, f"match {match_id}: auto-dispatch {state} (was {'on' if before else 'off'})")


#: Exit codes of verify-archive and backfill beside 0 (they agree) and 1 (they do not): by kind.
EXIT_BUSY = EXIT_OF[ErrorKind.CONFLICT]
EXIT_UNAVAILABLE = EXIT_OF[ErrorKind.UNAVAILABLE]

_ARCHIVE_EXIT_HELP = (
    "Exit codes: 0 the archive and the play-by-play agree; 1 they do not; 2 unknown match; "
    "5 the play-by-play cannot be had (SPORTRADAR_BASE_URL does not answer, or answers something unusable)."
)


def verification_lines(data: dict[str, Any], *, match: str) -> list[str]:
    """A verification as text: one summary line (counts), then one line of ids per kind that has any."""
    kinds = ("missing", "extra", "differing")
    if data["ok"]:
        return [f"match {match}: archive ok: it agrees with the play-by-play ({data['events']} events)"]
    counts = ", ".join(f"{len(data[k])} {k}" for k in kinds)
    lines = [f"match {match}: archive NOT ok against the play-by-play ({data['events']} events): {counts}"]
    lines += [f"  {k}: {' '.join(data[k])}" for k in kinds if data[k]]
    return lines


def verification_text(archive: dict[str, Any]) -> str:
    """The stored last verification of ``matches show``: ``never``, ``ok (N events) at T`` or its counts."""
    from lifecycle.board import archive_cell, verification_counts

    stored = archive.get("verification")
    ok, missing, extra, differing = verification_counts(stored)
    if ok is None:
        return "never (kickoff matches verify-archive)"
    cell = archive_cell(ok, missing, extra, differing)
    return f"{cell} ({stored.get('events', 0)} events) at {archive['verified_at']}"


def _archive_answer(run: Any) -> Any:
    """Run ``run()``; a play-by-play that cannot be had exits 5, a busy archive 4 (one line on stderr)."""
    import sys

    from config.errors import ServiceUnavailable
    from listener.errors import ArchiveBusy

    try:
        return run()
    except ArchiveBusy as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_BUSY)
    except ServiceUnavailable as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_UNAVAILABLE)


@matches.command("verify-archive", epilog=_ARCHIVE_EXIT_HELP)
@click.argument("match_id", type=MATCH_ID)
@json_option('Print {"ok", "missing", "extra", "differing", "events"} (full id lists).')
@click.pass_obj
def verify_archive(obj: CliContext, match_id: str, as_json: bool) -> None:
    """Compare MATCH_ID's listener archive with the provider's play-by-play.

    The archive's side is the match's event log in PostgreSQL (what every run on every listener host
    recorded; any host can verify it), each event in its current state (updates applied, deletes
    removed); the play-by-play comes from SPORTRADAR_BASE_URL (the settings
    of a listener's backfill). Prints the counts, then the ids of the events missing from the
    archive, extra in it, and differing (another version). The outcome is stored on the match
    (archive_verification, shown by the board and the console).
    """
    from lifecycle.archive_verify import verify_match_archive

    obj.database()
    result = _archive_answer(lambda: verify_match_archive(match_id, settings=obj.settings, audit=obj.audit()))
    data = result.as_dict()
    if as_json:
        echo_json(data)
    else:
        for line in verification_lines(data, match=match_id):
            click.echo(line)
    if not result.ok:
        click.get_current_context().exit(1)


@matches.command(
    "backfill",
    epilog=_ARCHIVE_EXIT_HELP.replace("2 unknown match;", "2 unknown match; 4 a listener owns the archive;"),
)
@click.argument("match_id", type=MATCH_ID)
@reason_option(required=False)
@json_option('Print {"ok", "missing", "extra", "differing", "events", "backfilled"} (full id lists).')
@click.pass_obj
def backfill(obj: CliContext, match_id: str, reason: str | None, as_json: bool) -> None:
    """Fill MATCH_ID's event log from the play-by-play, then verify it (as verify-archive).

    For a game that closed while no listener ran (its last run was abandoned): every event the
    archive lacks, or holds in an older version, is appended (marked backfilled), events it holds
    that the play-by-play no longer lists are deleted. Refused while a listener may own the
    archive (an open lifecycle row or a held start lock). The sweep enqueues the same job
    (backfill_match_archive) when it abandons the last run of a match whose game is over. The
    backfill is audited (match.backfill).
    """
    from lifecycle.archive_verify import backfill_match_archive

    obj.database()
    result = _archive_answer(
        lambda: backfill_match_archive(
            match_id, settings=obj.settings, coordination=obj.coordination, audit=obj.audit(reason)
        )
    )
    data = {**result.as_dict(), "backfilled": result.backfilled}
    if as_json:
        echo_json(data)
    else:
        click.echo(f"match {match_id}: {result.backfilled} events backfilled from the play-by-play")
        for line in verification_lines(data, match=match_id):
            click.echo(line)
    if not result.ok:
        click.get_current_context().exit(1)


@matches.command("export", epilog="Exit codes: 0 written; 2 unknown match.")
@click.argument("match_id", type=MATCH_ID)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True, path_type=str),
    default=None,
    help="File to write (default: ./{shortcode}.json); - writes to stdout.",
)
@click.pass_obj
def export(obj: CliContext, match_id: str, out: str | None) -> None:
    """Write MATCH_ID's event log as the spec's {shortcode}.json document, from any host.

    A JSON array, one message per line, every distinct message of the match once, in arrival order
    (kickoff's markers and its note on recovered messages included), read from PostgreSQL a page at
    a time.
    """
    import sys
    from pathlib import Path

    from lifecycle.event_export import export_lines, export_match
    from lifecycle.match_ref import resolve_match

    obj.database()
    if out == "-":
        match = resolve_match(match_id)
        for chunk in export_lines(str(match.id)):
            sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
        return
    match, path, count = export_match(match_id, out=Path(out) if out else None)
    click.echo(f"match {match.id}: {count} messages -> {path}")
