"""``kickoff enqueue ACTOR [--kw KEY=VALUE ...]``: send a message to any actor on its queue."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import click

from cli.answers import answer_and_exit
from cli.common import MATCH_ID, echo_json, json_option, parse_assignments, reason_option
from cli.context import CliContext
from config.errors import NotFound
from lifecycle.errors import StartAttemptsExhausted


def check_actor_kwargs(actor_name: str, fn: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """Refuse keyword arguments the actor's function would not accept (one line naming them)."""
    try:
        inspect.signature(fn).bind(**kwargs)
    except TypeError as exc:
        raise click.BadParameter(f"{actor_name}: {exc}", param_hint="--kw") from exc


@click.command("enqueue")
@click.argument("actor_name", metavar="ACTOR")
@click.option(
    "--kw",
    "kws",
    multiple=True,
    metavar="KEY=VALUE",
    help='Keyword argument of the actor (JSON values: true, 30, null, "text"); repeatable.',
)
@reason_option(
    required=False, help="Why (required for a forced start_match_listener; kept in the audit log)."
)
@json_option('Print {"actor", "queue", "message_id", "kwargs", "detail"}.')
@click.pass_obj
def enqueue(
    obj: CliContext, actor_name: str, kws: tuple[str, ...], reason: str | None, as_json: bool
) -> None:
    """Send one message to ACTOR (e.g. dispatch_upcoming_match_listeners, start_match_listener).

    start_match_listener goes through the same path as `kickoff listeners start` (pending key,
    stored message id, so a stop can revoke it): --kw match_id=<internal id or sr_id> [--kw force=true]
    [--kw overrides='{"listener_dry_run": true}']; a match whose start attempts are exhausted is a
    conflict (exit 4) unless forced. A forced start needs --reason (kept in the audit log).

    dispatch_upcoming_match_listeners is a one-shot: within_minutes defaults to 0 (matches due
    now); --kw within_minutes=30 widens it, --kw within_minutes=null uses the scheduler's
    LISTENER_DISPATCH_WITHIN_MINUTES.

    The keyword arguments are checked against the actor's signature before anything is sent.
    Prints what was enqueued (actor, queue, message id). Each message sent is audited
    (actor.enqueue; a start as listener.start or listener.force_start).
    """
    import actors  # noqa: F401  configures the actor runtime
    from actors.actor_runtime import current

    kwargs = parse_assignments(kws, option="--kw")
    broker = current().broker
    if actor_name not in broker.actors:
        raise NotFound(f"no actor named {actor_name!r}; known: {', '.join(sorted(broker.actors))}")
    actor = broker.get_actor(actor_name)
    check_actor_kwargs(actor_name, actor.fn, kwargs)
    if actor_name == "dispatch_upcoming_match_listeners":
        from lifecycle.dispatch import MANUAL_WITHIN_MINUTES

        kwargs.setdefault("within_minutes", MANUAL_WITHIN_MINUTES)
    if actor_name == "start_match_listener":
        from actors.listeners import send_start
        from lifecycle.dispatch import request_start
        from lifecycle.listener_run import load_match_with_league, validate_listener_settings
        from models.audit import AuditContext

        overrides = kwargs.get("overrides")
        if overrides is not None and not isinstance(overrides, dict):
            raise click.BadParameter("overrides must be a JSON object", param_hint="--kw")
        validate_listener_settings(overrides, source="--kw overrides")
        if kwargs.get("force") and not reason:
            raise click.UsageError(
                "a forced start_match_listener needs --reason TEXT (it goes into the audit log)"
            )
        obj.database()
        kwargs["match_id"] = MATCH_ID.convert(str(kwargs["match_id"]), None, click.get_current_context())
        match_id = str(load_match_with_league(kwargs["match_id"]).id)
        try:
            message, note = request_start(
                match_id,
                overrides=kwargs.get("overrides"),
                force=bool(kwargs.get("force")),
                coordination=obj.coordination,
                send=send_start,
                audit=AuditContext(obj.actor, reason),
            )
        except StartAttemptsExhausted as exc:  # a conflict, as `kickoff listeners start` answers it
            answer_and_exit(exc, as_json=as_json)
        message_id = message.message_id if message else None
    else:
        from actors.broker import send_to_actor

        if (
            actor_name == "stop_match_listener"
        ):  # as `kickoff listeners stop`: a reason, and who is the CLI's user
            if not reason:
                raise click.UsageError("stop_match_listener needs --reason TEXT (it goes into the audit log)")
            if "stopped_by" in kwargs:
                raise click.BadParameter("stopped_by is the CLI's user, not a --kw", param_hint="--kw")
            kwargs["stopped_by"] = obj.actor.name
        obj.database()
        sent = send_to_actor(actor, kwargs, audit=obj.audit(reason))
        message_id, note = (
            sent.message_id,
            f"enqueued {actor_name} as {sent.message_id} on {actor.queue_name}",
        )
    if as_json:
        echo_json(
            {
                "actor": actor_name,
                "queue": actor.queue_name,
                "message_id": message_id,
                "kwargs": kwargs,
                "detail": note,
            }
        )
    else:
        click.echo(note)
