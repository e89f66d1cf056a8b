"""``kickoff check``: ask each backing service for an answer and print one line per service."""

from __future__ import annotations

import click

from cli.common import echo_json
from cli.context import CliContext
from config.errors import ConfigurationError, ServiceUnavailable
from config.settings import mask_url


def _check_database(obj: CliContext) -> None:
    obj.database()


def _check_redis(obj: CliContext) -> None:
    obj.barriers.ping()


def _check_broker(obj: CliContext) -> None:
    from models.barriers import Barriers, connect_redis

    settings = obj.settings
    Barriers(connect_redis(settings.broker_url), prefix="", url=settings.broker_url).ping()


def _check_rabbitmq(obj: CliContext) -> None:
    from publisher.amqp import publisher_from_settings
    from publisher.queues import OUTBOX_QUEUES

    with publisher_from_settings(obj.settings) as publisher:
        for queue in OUTBOX_QUEUES:
            publisher.check_queue(queue)


CHECKS = (
    ("PostgreSQL", "DATABASE_URL", "database_url", _check_database),
    ("Redis", "REDIS_URL", "redis_url", _check_redis),
    ("Dramatiq broker", "BROKER_URL", "broker_url", _check_broker),
    ("RabbitMQ", "AMQP_URL", "amqp_url", _check_rabbitmq),
)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def check(obj: CliContext, as_json: bool) -> None:
    """Check that PostgreSQL, Redis and RabbitMQ answer at the configured addresses.

    For RabbitMQ it also checks that the outbox queues exist (`kickoff amqp setup`).

    Prints one line per service; exits 1 when any does not answer.
    """
    results: dict[str, str] = {}
    failed = False
    for service, setting, attr, probe in CHECKS:
        try:
            probe(obj)
            results[service] = "ok"
            line = f"ok    {service} at {setting}={mask_url(getattr(obj.settings, attr))}"
        except (ServiceUnavailable, ConfigurationError) as exc:
            failed = True
            results[service] = str(exc)
            line = f"FAIL  {exc}"
        if not as_json:
            click.echo(line)
    if as_json:
        echo_json({"ok": not failed, "services": results})
    if failed:
        raise SystemExit(1)
