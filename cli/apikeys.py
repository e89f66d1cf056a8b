"""``kickoff apikeys``: create (the key is printed once), list and revoke API keys of `kickoff serve`."""

from __future__ import annotations

import click

from cli.common import LIMIT_OPTION, echo_answer, echo_json, json_option, reason_option
from cli.context import CliContext
from cli.table import echo_listing

SCOPES = ("read", "trigger", "operator", "admin")


@click.group("apikeys")
def apikeys() -> None:
    """API keys for `kickoff serve` (Authorization: Bearer KEY).

    \b
    read      every GET route
    trigger   triggers, trades, action results, run publishing
    operator  read and trigger, listener operations, trade reconcile
    admin     everything, and managing keys (GET/POST/DELETE /v1/apikeys)
    A key created with --league acts only on those leagues (403 for another).
    Only a key's SHA-256 is stored: the key is printed once, by create.
    """


@apikeys.command("create")
@click.option("--name", required=True, help="Who or what uses the key (shown by list).")
@click.option("--scope", type=click.Choice(SCOPES), required=True, help="What the key may call.")
@click.option(
    "--league",
    "leagues",
    multiple=True,
    help="Limit the key to this league (repeat for more): a trigger's league id, a match's league name.",
)
@reason_option(required=False)
@json_option('Print {"id": ..., "key": ...}.')
@click.pass_obj
def create_cmd(
    obj: CliContext, name: str, scope: str, leagues: tuple[str, ...], reason: str | None, as_json: bool
) -> None:
    """Create a key and print it once (it cannot be shown again); --league limits it to leagues."""
    from api.keys import Scope, create_key
    from models.audit import AuditContext

    if not name.strip():
        raise click.BadParameter("must not be empty", param_hint="--name")
    obj.database()
    key, secret = create_key(
        name=name.strip(), scope=Scope(scope), leagues=leagues or None, audit=AuditContext(obj.actor, reason)
    )
    if as_json:
        echo_json({"id": key.id, "key": secret})
        return
    click.echo(f"id:    {key.id}")
    click.echo(f"key:   {secret}")
    click.echo("Store the key now: it is not stored and cannot be shown again.")


@apikeys.command("list")
@LIMIT_OPTION
@json_option('Print {"count", "keys": [{"id", "name", "scope", ...}]}.')
@click.pass_obj
def list_cmd(obj: CliContext, limit: int, as_json: bool) -> None:
    """List keys (a table of id, scope, name, leagues, created, revoked); never the keys themselves."""
    from api.keys import list_keys

    obj.database()
    echo_listing(
        as_json,
        "keys",
        list_keys()[:limit],
        as_dict=lambda key: key.as_dict(),
        headers=["id", "scope", "name", "leagues", "created", "revoked"],
        row=lambda key: [
            key.id,
            key.scope.value,
            key.name,
            ",".join(key.leagues) if key.leagues else "all",
            key.created_at.isoformat(),
            key.revoked_at.isoformat() if key.revoked_at else "",
        ],
        empty="no API keys",
    )


@apikeys.command("revoke")
@click.argument("key_id")
@reason_option(required=False)
@json_option('Print the key: {"id", "name", "scope", "revoked_at", ...}.')
@click.pass_obj
def revoke_cmd(obj: CliContext, key_id: str, reason: str | None, as_json: bool) -> None:
    """Revoke key KEY_ID at once (exit 2 if unknown); its row stays for the record."""
    from api.keys import revoke_key
    from models.audit import AuditContext

    obj.database()
    key = revoke_key(key_id, audit=AuditContext(obj.actor, reason))
    echo_answer(as_json, key.as_dict(), f"revoked {key.id} ({key.name})")
