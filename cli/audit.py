"""``kickoff audit``: read the audit log (list, export as NDJSON) and prune it (retention)."""

from __future__ import annotations

import json
from datetime import datetime

import click

from cli.common import LIMIT_OPTION, MATCH_ID, echo_json, json_option
from cli.context import CliContext
from cli.table import echo_table


def _since(value: str | None, *, option: str = "--since") -> datetime | None:
    from config.clock import parse_iso8601
    from config.errors import InvalidTimeError

    if value is None:
        return None
    try:
        return parse_iso8601(value, what=option)
    except InvalidTimeError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from exc


@click.group("audit")
def audit() -> None:
    """The operator's record: every state-changing act (CLI, API, console), who, why and when.

    Entries are append-only (PostgreSQL refuses UPDATE and DELETE); entries older than
    AUDIT_RETENTION_DAYS are deleted by the scheduler's daily prune_audit_log (or `audit prune`).
    """


@audit.command("list")
@click.option("--who", default=None, help='Only this actor: an API key\'s name, or "os_user@host".')
@click.option("--action", default=None, help="Only this action (e.g. listener.stop).")
@click.option("--match", "match_id", type=MATCH_ID, default=None, help="Only acts on this match.")
@click.option(
    "--since", default=None, metavar="ISO", help="Only entries at or after this time (with offset)."
)
@LIMIT_OPTION
@json_option(
    'Print {"entries": [{"at", "who", "who_key_id", "action", "target", "title", "reason", "before",'
    ' "after", "request_id"}]}.'
)
@click.pass_obj
def list_cmd(
    obj: CliContext,
    who: str | None,
    action: str | None,
    match_id: str | None,
    since: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """The newest entries first (at most --limit)."""
    from models.audit import audit_entries

    when = _since(since)
    obj.database()
    entries = audit_entries(who=who, action=action, match_id=match_id, since=when, limit=limit)
    if as_json:
        echo_json({"entries": [e.as_dict() for e in entries]})
        return
    echo_table(
        ["at", "who", "key id", "action", "target", "match", "reason"],
        [
            (
                e.as_dict()["at"][:19],
                e.who,
                e.who_key_id or "-",
                e.action,
                e.target,
                e.title or "",
                e.reason or "",
            )
            for e in entries
        ],
        empty="no audit entries",
    )


@audit.command("export")
@click.option("--since", required=True, metavar="ISO", help="Entries at or after this time (with offset).")
@click.pass_obj
def export_cmd(obj: CliContext, since: str) -> None:
    """Print every entry since --since, oldest first, as NDJSON (one JSON object per line)."""
    from models.audit import audit_entries

    when = _since(since)
    obj.database()
    for entry in audit_entries(since=when, limit=None, oldest_first=True):
        click.echo(json.dumps(entry.as_dict(), default=str, sort_keys=True))


@audit.command("prune")
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=None,
    help="Delete entries older than this many days (default AUDIT_RETENTION_DAYS).",
)
@json_option('Print {"deleted", "days"}.')
@click.pass_obj
def prune_cmd(obj: CliContext, days: int | None, as_json: bool) -> None:
    """Delete the entries older than the retention (as the scheduler's daily job); the prune is an entry.

    Fewer days than the floor (AUDIT_RETENTION_DAYS at the last `kickoff db migrate`) are refused.
    """
    from models.audit import prune_audit

    days = days or obj.settings.audit_retention_days
    obj.database()
    deleted = prune_audit(days=days, actor=obj.actor)
    if as_json:
        echo_json({"deleted": deleted, "days": days})
    else:
        click.echo(f"audit: {deleted} entries older than {days} days deleted")
