"""``kickoff matches``: add and list matches, turn a match's auto-dispatch on or off."""

from __future__ import annotations

import click

from cli.common import MATCH_ID, echo_json, parse_assignments
from cli.context import CliContext
from config.errors import KickoffError
from models.db import database_errors


@click.group("matches")
def matches() -> None:
    """Matches the dispatcher may start listeners for (MATCH_ID is the internal UUID)."""


@matches.command("add")
@click.option("--league", required=True, help="League name (must exist: kickoff leagues add).")
@click.option("--sr-id", required=True, help="The provider's match id (Match.sr_id).")
@click.option("--scheduled", required=True, help="Start time, ISO 8601 with an offset (Z accepted).")
@click.option("--status", default="scheduled", show_default=True, help="Initial Match.status.")
@click.option("--title", default=None, help="Optional display title.")
@click.option("--test", "is_test", is_flag=True, help="An is_test clone (simulator-owned status).")
@click.option("--no-auto-dispatch", is_flag=True, help="Create with auto-dispatch off.")
@click.option(
    "--setting",
    "settings_",
    multiple=True,
    metavar="KEY=VALUE",
    help="Per-match listener setting (Match.listener_start_settings); repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help='Print {"id": ...}.')
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
    settings_: tuple[str, ...],
    as_json: bool,
) -> None:
    """Add a match; prints its internal id."""
    import peewee

    from config.clock import parse_iso8601
    from listener.leagues import get_league
    from listener.start import validate_listener_settings
    from models.match import Match
    from models.status import normalise

    when = parse_iso8601(scheduled, what="--scheduled")
    if normalise(status) is None:
        raise click.BadParameter(f"unknown status {status!r}", param_hint="--status")
    per_match = parse_assignments(settings_, option="--setting")
    validate_listener_settings(per_match, source="--setting")
    obj.database()
    lg = get_league(league)
    with database_errors():
        try:
            match = Match.create(
                league=lg,
                sr_id=sr_id,
                scheduled=when,
                status=normalise(status),
                title=title,
                is_test=is_test,
                auto_dispatch_listener=not no_auto_dispatch,
                listener_start_settings=per_match,
            )
        except peewee.IntegrityError as exc:
            raise KickoffError(f"a match with sr_id {sr_id!r} already exists") from exc
    if as_json:
        echo_json({"id": str(match.id)})
    else:
        click.echo(str(match.id))


@matches.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def list_(obj: CliContext, as_json: bool) -> None:
    """List matches by start time, each with its listener badge (as `kickoff listeners status`)."""
    from listener.board import listener_board
    from models.league import League
    from models.match import Match

    obj.database()
    with database_errors():
        query = Match.select(Match, League).join(League).order_by(Match.scheduled, Match.id)
        rows = [
            {
                "id": str(m.id),
                "sr_id": m.sr_id,
                "league": m.league.name,
                "scheduled": m.scheduled.isoformat(),
                "status": m.status,
                "is_test": m.is_test,
                "auto_dispatch": m.auto_dispatch_listener,
            }
            for m in query
        ]
    board = listener_board(settings=obj.settings, barriers=obj.barriers, match_ids=[r["id"] for r in rows])
    badges = {e.match_id: e.badge for e in board}
    for r in rows:
        r["badge"] = badges.get(r["id"], "-")
    if as_json:
        echo_json({"matches": rows})
        return
    for r in rows:
        flags = ("test " if r["is_test"] else "") + ("" if r["auto_dispatch"] else "dispatch-off")
        click.echo(
            f"{r['id']}  {r['sr_id']:<28} {r['league']:<6} {r['scheduled']}  {r['status']:<10} "
            f"{r['badge']:<9} {flags}"
        )


@matches.command("set-dispatch")
@click.argument("match_id", type=MATCH_ID)
@click.argument("state", type=click.Choice(["on", "off"]))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def set_dispatch(obj: CliContext, match_id: str, state: str, as_json: bool) -> None:
    """Turn auto-dispatch of MATCH_ID on or off (on also clears a leftover stop flag)."""
    from listener.cleanup import set_auto_dispatch

    obj.database()
    before = set_auto_dispatch(match_id, state == "on", barriers=obj.barriers)
    if as_json:
        echo_json({"match_id": match_id, "auto_dispatch": state == "on", "was": before})
    else:
        click.echo(f"match {match_id}: auto-dispatch {state} (was {'on' if before else 'off'})")
