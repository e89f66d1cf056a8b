"""``kickoff amqp setup``: declare the outbox queues (durable) on a fresh broker."""

from __future__ import annotations

import click

from cli.common import echo_json, json_option
from cli.context import CliContext
from config.settings import mask_url
from publisher.amqp import publisher_from_settings
from publisher.queues import OUTBOX_QUEUES, TRADE_QUEUES


@click.group()
def amqp() -> None:
    """RabbitMQ (AMQP_URL) set-up."""


@amqp.command(
    "setup",
    help=f"Declare {', '.join(OUTBOX_QUEUES)} durable (idempotent).\n\n"
    "The outboxes publish with a passive declare, so these queues must exist before anything is "
    "published; a missing one leaves messages pending with an error naming it.",
)
@click.option(
    "--with-trade-queues", is_flag=True, help="Also declare the trade queues (else declared on publish)."
)
@json_option('Print {"declared": [...], "amqp_url"}.')
@click.pass_obj
def setup_cmd(obj: CliContext, with_trade_queues: bool, as_json: bool) -> None:
    queues = list(OUTBOX_QUEUES) + (list(TRADE_QUEUES) if with_trade_queues else [])
    with publisher_from_settings(obj.settings) as publisher:
        declared = publisher.declare_durable(queues)
    if as_json:
        echo_json({"declared": declared, "amqp_url": mask_url(obj.settings.amqp_url)})
    else:
        for queue in declared:
            click.echo(f"declared {queue}")
