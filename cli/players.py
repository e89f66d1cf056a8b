"""``kickoff players``: sync the provider's players map (injury alerts) and keep league rosters."""

from __future__ import annotations

import click

from cli.common import echo_json, json_option
from cli.context import CliContext
from cli.table import echo_table
from models.leagues import PLAYERS


@click.group()
def players() -> None:
    """Player sync and rosters.

    A sync reads the players map (Sleeper's format: player id -> {full_name, team,
    injury_status, espn_id, ...}) and sends one INJURY_STATUS_CHANGE alert to waiver_actions for
    each rostered player whose status changed to Questionable, Doubtful or Out since the last
    sync. The first sync only records statuses. The map's ESPN ids also let the trigger routes
    refuse a Sleeper id given where an ESPN id belongs.
    """


@players.command("sync")
@click.option(
    "--source",
    default=None,
    metavar="URL_OR_FILE",
    help="The players map: an http(s) URL or a file (default PLAYERS_SOURCE).",
)
@json_option("Print one JSON object.")
@click.pass_obj
def sync_cmd(obj: CliContext, source: str | None, as_json: bool) -> None:
    """Sync once: alert rostered players' injury changes, then save the map.

    Prints how many players were synced, how many are rostered, how many were seen for the
    first time (recorded without an alert) and the alerts sent. A malformed record is skipped
    with its reason (one line each on stderr) and the others are synced.
    """
    from config.settings import mask_url
    from players.sync import sync_players
    from publisher.amqp import publisher_from_settings

    obj.database()
    src = source or obj.settings.players_source.format(
        base_url=obj.settings.sportradar_base_url, league=PLAYERS.name
    )
    with publisher_from_settings(obj.settings) as publisher:
        report = sync_players(src, publisher=publisher, audit=obj.audit())  # audited before the sync
    if as_json:
        echo_json({"source": mask_url(src), **report.as_json()})
        return
    click.echo(
        f"players: {report.players}; rostered: {report.rostered} ({report.first_seen} first seen); "
        f"injury alerts sent: {len(report.alerts)}; skipped: {len(report.skipped)}"
    )
    for key, reason in report.skipped.items():
        click.echo(f"skipped player {key}: {reason}", err=True)


@players.group("roster")
def roster_group() -> None:
    """The rostered players of each league (their injury changes are alerted)."""


@roster_group.command("add")
@click.option("--league", "league_id", required=True, help="The fantasy league id.")
@click.argument("sleeper_ids", nargs=-1, required=True)
@click.pass_obj
def roster_add(obj: CliContext, league_id: str, sleeper_ids: tuple[str, ...]) -> None:
    """Put players (Sleeper ids) on a league's roster; prints how many were added."""
    from players.sync import add_to_roster

    obj.database()
    added = add_to_roster(league_id, sleeper_ids, audit=obj.audit())  # with its entry, one transaction
    click.echo(f"roster {league_id}: {added} added, {len(sleeper_ids) - added} already there")


@roster_group.command("list")
@click.option("--league", "league_id", default=None, help="Only this league.")
@json_option('Print one JSON object: {"players": [...]}.')
@click.pass_obj
def roster_list(obj: CliContext, league_id: str | None, as_json: bool) -> None:
    """The rostered players with their last synced name, team and injury status."""
    from players.sync import roster

    obj.database()
    rows = roster(league_id)
    if as_json:
        echo_json({"players": rows})
        return
    echo_table(
        ("league", "sleeper_id", "name", "team", "injury_status"),
        [(r["league_id"], r["sleeper_id"], r["full_name"], r["team"], r["injury_status"]) for r in rows],
        empty="no rostered players",
    )
