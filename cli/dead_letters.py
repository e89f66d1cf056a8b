"""``kickoff dead-letters``: list, retry and purge dead-lettered Dramatiq messages (BROKER_URL)."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from cli.common import LIMIT_OPTION, echo_answer, echo_json, json_option, reason_option
from cli.context import CliContext
from cli.table import echo_listing

QUEUE_CHOICE = click.Choice(["default", "match_listeners"])


def _broker():
    import actors  # noqa: F401  configures the actor runtime
    from actors.actor_runtime import current

    return current().broker


@click.group("dead-letters")
def dead_letters() -> None:
    """Messages a worker gave up on (an actor raised; Dramatiq keeps them a week).

    A failed listener run is dead-lettered by design (its failure is also recorded on its row).
    """


@dead_letters.command("list")
@click.option("--queue", type=QUEUE_CHOICE, default=None, help="Only this queue.")
@LIMIT_OPTION
@json_option('Print {"count", "messages": [{"message_id", ...}]}.')
def list_cmd(queue: str | None, limit: int, as_json: bool) -> None:
    """List dead letters, newest first: message id, queue, actor, when, kwargs."""
    from actors.dead_letters import list_dead

    echo_listing(
        as_json,
        "messages",
        list_dead(_broker(), queue=queue, limit=limit),
        as_dict=lambda m: m.as_dict(),
        headers=["message_id", "queue", "actor", "dead_at", "kwargs"],
        row=lambda m: [
            m.message_id,
            m.queue,
            m.actor,
            datetime.fromtimestamp(m.dead_at, UTC).isoformat(timespec="seconds"),
            ", ".join(f"{k}={v}" for k, v in sorted(m.kwargs.items())),
        ],
        empty="no dead-lettered messages",
    )


@dead_letters.command("retry")
@click.argument("message_ids", nargs=-1, required=True, metavar="MESSAGE_ID...")
@reason_option(required=False)
@json_option('Print {"retried": [{"message_id", "new_message_id", ...}]}.')
@click.pass_obj
def retry_cmd(obj: CliContext, message_ids: tuple[str, ...], reason: str | None, as_json: bool) -> None:
    """Send each dead letter again as a new message and drop it; prints the new message ids.

    A start_match_listener goes through the start path: no second start of a pending match.
    """
    from actors.dead_letters import retry_dead
    from models.audit import AuditContext

    broker = _broker()
    obj.database()
    results = [
        retry_dead(broker, mid, coordination=obj.coordination, audit=AuditContext(obj.actor, reason))
        for mid in message_ids
    ]
    if as_json:
        echo_json({"retried": [r.as_dict() for r in results]})
        return
    for r in results:
        click.echo(f"{r.message_id}: {r.detail}")


@dead_letters.command("purge")
@click.argument("message_ids", nargs=-1, metavar="[MESSAGE_ID...]")
@click.option("--all", "purge_all", is_flag=True, help="Every dead letter (of --queue, or of every queue).")
@click.option("--queue", type=QUEUE_CHOICE, default=None, help="With --all: only this queue.")
@reason_option(required=False)
@json_option('Print {"purged": N}.')
@click.pass_obj
def purge_cmd(
    obj: CliContext,
    message_ids: tuple[str, ...],
    purge_all: bool,
    queue: str | None,
    reason: str | None,
    as_json: bool,
) -> None:
    """Delete the given dead letters, or --all; prints how many were deleted."""
    from actors.dead_letters import purge_dead
    from models.audit import AuditContext

    if bool(message_ids) == purge_all:
        raise click.UsageError("give MESSAGE_ID... or --all (not both)")
    broker = _broker()
    obj.database()
    removed = purge_dead(
        broker,
        message_ids=list(message_ids) if message_ids else None,
        queue=queue,
        audit=AuditContext(obj.actor, reason),
    )
    echo_answer(as_json, {"purged": removed}, f"purged {removed} dead-lettered message(s)")
