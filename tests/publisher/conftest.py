"""Publisher fixtures: a publisher on this run's RabbitMQ vhost with empty outbox and trade queues."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from cli.main import cli
from config.settings import KickoffSettings
from publisher.amqp import AmqpPublisher


@pytest.fixture
def pub_settings(test_env: dict[str, str], amqp_vhost: str) -> KickoffSettings:
    """This run's settings with short publisher intervals (no grace before the drain may publish).

    KickoffSettings, as the publisher reads no listener setting."""
    return KickoffSettings(
        _env_file=None,
        **{k.lower(): v for k, v in test_env.items()},
        outbox_immediate_grace_seconds=0.0,
        outbox_backoff_base_seconds=0.01,
        outbox_backoff_max_seconds=0.05,
        outbox_max_attempts=3,
        amqp_confirm_timeout_seconds=5.0,
        activity_parent_read_timeout_seconds=0.3,
    )


@pytest.fixture
def publisher(amqp_vhost: str, fresh_queues: None, db: str) -> Iterator[AmqpPublisher]:
    """A publisher on this run's vhost (closed after the test)."""
    pub = AmqpPublisher(url=amqp_vhost, confirm_timeout=5.0)
    yield pub
    pub.close()


@pytest.fixture
def run(test_env, publisher):
    """The kickoff CLI in process on this run's services: ``run(*args)`` gives (exit code, output)."""
    runner = CliRunner()

    def invoke(*args: str) -> tuple[int, str]:
        result = runner.invoke(cli, list(args), env=test_env, catch_exceptions=False)
        return result.exit_code, result.output

    return invoke
