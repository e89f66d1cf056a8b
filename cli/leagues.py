"""``kickoff leagues``: add and list leagues (a disabled league's matches never get listeners)."""

from __future__ import annotations

import click
import peewee

from cli.common import echo_json
from cli.context import CliContext
from config.errors import KickoffError
from models.db import database_errors


@click.group("leagues")
def leagues() -> None:
    """Leagues by feed name (nfl, mlb, ...); only enabled leagues are dispatched."""


@leagues.command("add")
@click.argument("name")
@click.option("--disabled", is_flag=True, help="Create the league disabled (no dispatch).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def add(obj: CliContext, name: str, disabled: bool, as_json: bool) -> None:
    """Add league NAME (the feed's league segment, e.g. nfl)."""
    from models.league import League

    obj.database()
    try:
        with database_errors():
            league = League.create(name=name, enabled=not disabled)
    except peewee.IntegrityError as exc:
        raise KickoffError(f"league {name!r} already exists") from exc
    if as_json:
        echo_json({"id": league.id, "name": league.name, "enabled": league.enabled})
    else:
        click.echo(f"league {league.name} added ({'enabled' if league.enabled else 'disabled'})")


@leagues.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def list_(obj: CliContext, as_json: bool) -> None:
    """List leagues and whether they are enabled."""
    from models.league import League

    obj.database()
    with database_errors():
        rows = [
            {"id": lg.id, "name": lg.name, "enabled": lg.enabled}
            for lg in League.select().order_by(League.name)
        ]
    if as_json:
        echo_json({"leagues": rows})
        return
    for r in rows:
        click.echo(f"{r['name']:<12} {'enabled' if r['enabled'] else 'disabled'}")
