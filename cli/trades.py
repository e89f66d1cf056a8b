"""``kickoff trades reconcile`` and ``retry``: trade claims waiting for an operator, resolved or resent."""

from __future__ import annotations

import contextlib

import click

from cli.common import LIMIT_OPTION, echo_answer, json_option, reason_option
from cli.context import CliContext
from cli.table import echo_listing
from models.audit import Actor, AuditContext
from publisher.amqp import publisher_from_settings
from publisher.queues import TRADE_QUEUES
from publisher.trade_reconcile import STALE_CLAIM_SECONDS, Resolution, claims_to_reconcile, reconcile_claim
from publisher.trades import ExecutionEntry, retry_claim


@click.group()
def trades() -> None:
    """Trade claims in execution_log (trade_submissions, trade_responses, trade_negotiations).

    A trade is claimed in execution_log, then published. A claim the unreachable broker never
    got is `pending` and every outbox drain republishes it with its message id. A claim whose
    confirm never came is `uncertain`: the broker may hold it, so nothing sends it again by
    itself. Uncertain claims, claims the broker refused (`failed`: an offer, a decision or a
    counter), claims the drain set aside (`set_aside`, with the reason) and claims stuck in
    `claimed` (a crash mid-publish) wait for an operator: `kickoff trades reconcile`. A failed
    or pending claim can also be sent again at once: `kickoff trades retry`.
    """


LEAGUE_OPTION = click.option(
    "--league",
    "league_id",
    default=None,
    help="The league whose claim of the key it is (a key is claimed once per league); needed only "
    "when more than one league claimed it.",
)


@trades.command("retry")
@click.argument("queue", type=click.Choice(TRADE_QUEUES))
@click.argument("claim_key")
@LEAGUE_OPTION
@reason_option(required=False)
@json_option("Print the answer: {status, queue, claim_key, message_id, error}.")
@click.pass_obj
def retry_cmd(
    obj: CliContext, queue: str, claim_key: str, league_id: str | None, reason: str | None, as_json: bool
) -> None:
    """Publish a failed or pending claim (offer, decision or counter) again with its message id.

    Audited (trade.retry). A claim in any other status is refused (a conflict): reconcile it instead.
    """
    obj.database()
    with publisher_from_settings(obj.settings) as publisher:
        result = retry_claim(
            queue=queue,
            claim_key=claim_key,
            publisher=publisher,
            audit=AuditContext(obj.actor, reason),
            league_id=league_id,
        )
    echo_answer(
        as_json, result.as_json(), f"{queue} {claim_key}: {result.status} (message id {result.message_id})"
    )


@trades.command("reconcile")
@click.argument("queue", required=False, type=click.Choice(TRADE_QUEUES), metavar="[QUEUE]")
@click.argument("claim_key", required=False, metavar="[CLAIM_KEY]")
@click.option(
    "--as",
    "resolution",
    type=click.Choice([r.value for r in Resolution]),
    help="published: the worker got it (nothing is sent); republish: send it again now with the "
    "same message id; cancel: never send it (its key stays claimed).",
)
@click.option(
    "--operator",
    default=lambda: Actor.cli().name,
    help="Who resolved it (recorded on the claim; default: the user of the process's real uid @ host).",
)
@click.option(
    "--stale-seconds",
    type=click.FloatRange(min=0),
    default=STALE_CLAIM_SECONDS,
    show_default=True,
    help="A claim stuck this long in `claimed` waits for an operator too.",
)
@LEAGUE_OPTION
@LIMIT_OPTION
@reason_option(required=False)
@json_option('Print {"count", "claims": [{"queue", "claim_key", "status", ...}]}, or the resolved claim.')
@click.pass_obj
def reconcile_cmd(
    obj: CliContext,
    queue: str | None,
    claim_key: str | None,
    resolution: str | None,
    operator: str,
    stale_seconds: float,
    league_id: str | None,
    limit: int,
    reason: str | None,
    as_json: bool,
) -> None:
    """List the claims waiting for an operator, or resolve one: QUEUE CLAIM_KEY --as CHOICE.

    Without arguments: a table of queue, claim key, status, league, message id and error (the
    reason a claim was set aside), oldest first; "no trade claims to reconcile" when there is none.
    With QUEUE and CLAIM_KEY, --as is required and the claim is resolved; the line printed is
    its new status (republish: as the broker answered). A key is claimed once per league: --league
    picks the claim when more than one league claimed the key.
    """
    if claim_key is None:
        if queue is not None or resolution is not None or league_id is not None:
            raise click.UsageError("give QUEUE, CLAIM_KEY and --as to resolve a claim (none to list them)")
        obj.database()
        echo_listing(
            as_json,
            "claims",
            claims_to_reconcile(stale_claim_seconds=stale_seconds, limit=limit),
            as_dict=ExecutionEntry.as_json,
            headers=["queue", "claim_key", "status", "league", "message_id", "error"],
            row=lambda e: [e.queue, e.claim_key, e.status, e.league_id, e.message_id, e.error],
            empty="no trade claims to reconcile",
        )
        return
    if resolution is None:
        raise click.UsageError("--as is required to resolve a claim (published, republish or cancel)")
    obj.database()
    choice = Resolution(resolution)
    with contextlib.ExitStack() as stack:
        publisher = (
            stack.enter_context(publisher_from_settings(obj.settings))
            if choice is Resolution.REPUBLISH
            else None
        )
        entry = reconcile_claim(
            queue=str(queue),
            claim_key=claim_key,
            resolution=choice,
            operator=operator,
            publisher=publisher,
            stale_claim_seconds=stale_seconds,
            audit=AuditContext(obj.actor, reason),
            league_id=league_id,
        )
    echo_answer(
        as_json,
        entry.as_json(),
        f"{entry.queue} {entry.claim_key}: {entry.status} ({entry.resolution} by {entry.resolved_by}; "
        f"message id {entry.message_id})",
    )
