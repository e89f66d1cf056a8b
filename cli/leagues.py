"""``kickoff leagues``: add, list, enable and disable leagues (disabled: no listener is started)."""

from __future__ import annotations

import click

from cli.common import LIMIT_OPTION, echo_answer, echo_json, json_option, reason_option
from cli.context import CliContext
from cli.table import echo_table


@click.group("leagues")
def leagues() -> None:
    """Leagues by feed name (nfl, mlb, ...); only enabled leagues are dispatched.

    A name is one archive directory ({DATA_DIR}/listener/NAME): letters, digits, '.', '_' and
    '-', no leading dot; names are unique case-insensitively.
    """


def _league_dict(league: object) -> dict[str, object]:
    return {"id": league.id, "name": league.name, "enabled": league.enabled}  # type: ignore[attr-defined]


@leagues.command("add")
@click.argument("name")
@click.option("--disabled", is_flag=True, help="Create the league disabled (no dispatch).")
@json_option('Print {"id", "name", "enabled"}.')
@click.pass_obj
def add(obj: CliContext, name: str, disabled: bool, as_json: bool) -> None:
    """Add league NAME (the feed's league segment, e.g. nfl); prints what was added."""
    from lifecycle.errors import InvalidLeagueName
    from lifecycle.leagues import add_league, check_league_name

    try:
        check_league_name(name)
    except InvalidLeagueName as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from exc
    obj.database()
    league = add_league(name, enabled=not disabled, audit=obj.audit())  # with its entry, one transaction
    state = "enabled" if league.enabled else "disabled"
    echo_answer(as_json, _league_dict(league), f"league {league.name} added ({state})")


@leagues.command("list")
@LIMIT_OPTION
@json_option('Print {"leagues": [{"id", "name", "enabled"}]}.')
@click.pass_obj
def list_(obj: CliContext, limit: int, as_json: bool) -> None:
    """List leagues by name: a table of name and enabled/disabled."""
    from models.league import leagues_by_name

    obj.database()
    rows = [_league_dict(lg) for lg in leagues_by_name(limit)]
    if as_json:
        echo_json({"leagues": rows})
        return
    echo_table(
        ["name", "state"],
        ([r["name"], "enabled" if r["enabled"] else "disabled"] for r in rows),
        empty="no leagues (kickoff leagues add NAME)",
    )


def _switch_command(name: str, enabled: bool, help: str) -> click.Command:
    """``kickoff leagues enable|disable NAME``: set ``enabled``; prints the new and old state."""

    @leagues.command(name, help=help)
    @click.argument("name")
    @reason_option(required=False)
    @json_option('Print {"id", "name", "enabled", "was_enabled"}.')
    @click.pass_obj
    def switch(obj: CliContext, name: str, reason: str | None, as_json: bool) -> None:
        from lifecycle.leagues import set_league_enabled
        from models.audit import AuditContext

        obj.database()
        league, before = set_league_enabled(name, enabled, audit=AuditContext(obj.actor, reason))
        state = "enabled" if enabled else "disabled"
        was = "enabled" if before else "disabled"
        data = {**_league_dict(league), "was_enabled": before}
        echo_answer(as_json, data, f"league {league.name} {state} (was {was})")

    return switch


enable = _switch_command(
    "enable", True, "Enable league NAME: its matches are dispatched again; prints the new and old state."
)
disable = _switch_command(
    "disable",
    False,
    "Disable league NAME: no new listener starts (running ones go on); prints the new and old state.",
)
