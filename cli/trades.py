"""``kickoff trades``: list and resolve trade claims whose publish result is uncertain."""

from __future__ import annotations

import getpass

import click

from cli.common import LIMIT_OPTION, json_option
from cli.context import CliContext
from cli.table import echo_listing
from publisher.amqp import publisher_from_settings
from publisher.queues import TRADE_QUEUES
from publisher.trades import Resolution, list_uncertain, resolve_uncertain


@click.group()
def trades() -> None:
    """Trade claims in execution_log (trade_submissions, trade_responses, trade_negotiations).

    A trade is claimed in execution_log, then published. A claim the unreachable broker never
    got is `pending`, one whose confirm never came is `uncertain`; every outbox drain
    republishes both with their message id. Claims stuck in `claimed` (a crash mid-publish) and
    uncertain ones can be checked against the worker's logs or ESPN and resolved here.
    """


@trades.command("uncertain")
@click.option(
    "--stale-seconds", type=float, default=60.0, help="Also list claims stuck this long in `claimed`."
)
@LIMIT_OPTION
@json_option('Print {"count", "claims": [{"queue", "claim_key", ...}]}.')
@click.pass_obj
def uncertain_cmd(obj: CliContext, stale_seconds: float, limit: int, as_json: bool) -> None:
    """List claims needing manual reconciliation.

    A table of queue, claim key, status, league, message id and error; "no uncertain trade claims"
    when there is none.
    """
    obj.database()
    echo_listing(
        as_json,
        "claims",
        list_uncertain(stale_claim_seconds=stale_seconds)[:limit],
        as_dict=lambda e: {**vars(e), "created_at": e.created_at.isoformat()},
        headers=["queue", "claim_key", "status", "league", "message_id", "error"],
        row=lambda e: [e.queue, e.claim_key, e.status, e.league_id, e.message_id, e.error],
        empty="no uncertain trade claims",
    )


@trades.command("resolve")
@click.argument("queue", type=click.Choice(TRADE_QUEUES))
@click.argument("claim_key")
@click.option(
    "--as",
    "resolution",
    type=click.Choice([r.value for r in Resolution]),
    required=True,
    help="published: the worker got it; not-published: it never arrived (a retry may publish); "
    "republish: send it again now with the same message id.",
)
@click.option("--operator", default=getpass.getuser, help="Who resolved it (recorded).")
@click.pass_obj
def resolve_cmd(obj: CliContext, queue: str, claim_key: str, resolution: str, operator: str) -> None:
    """Resolve one uncertain claim."""
    obj.database()
    with publisher_from_settings(obj.settings) as publisher:
        entry = resolve_uncertain(
            queue=queue,
            claim_key=claim_key,
            resolution=Resolution(resolution),
            operator=operator,
            publisher=publisher,
        )
    click.echo(f"{entry.queue} {entry.claim_key}: {entry.status} ({entry.resolution})")
