"""Publisher fixtures: a publisher on this run's RabbitMQ vhost with empty outbox and trade queues."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from config.settings import MatchListenerEnvironment
from publisher.amqp import AmqpPublisher, read_messages
from publisher.queues import ALL_QUEUES, OUTBOX_QUEUES


@pytest.fixture
def pub_settings(settings: MatchListenerEnvironment, amqp_vhost: str) -> MatchListenerEnvironment:
    """This run's settings with short publisher intervals (no grace before the drain may publish)."""
    return settings.model_copy(
        update={
            "outbox_immediate_grace_seconds": 0.0,
            "outbox_backoff_base_seconds": 0.01,
            "outbox_backoff_max_seconds": 0.05,
            "outbox_max_attempts": 3,
            "amqp_confirm_timeout_seconds": 5.0,
            "activity_parent_read_timeout_seconds": 0.3,
        }
    )


@pytest.fixture
def fresh_queues(amqp_vhost: str) -> Iterator[None]:
    """Delete every kickoff queue, then declare the outbox queues durable (like `kickoff amqp setup`)."""
    with AmqpPublisher(url=amqp_vhost) as admin:
        for queue in ALL_QUEUES:
            admin.delete_queue(queue)
        admin.declare_durable(OUTBOX_QUEUES)
    yield


@pytest.fixture
def publisher(amqp_vhost: str, fresh_queues: None, db: str) -> Iterator[AmqpPublisher]:
    """A publisher on this run's vhost (closed after the test)."""
    pub = AmqpPublisher(url=amqp_vhost, confirm_timeout=5.0)
    yield pub
    pub.close()


@pytest.fixture
def read_queue(amqp_vhost: str) -> Callable[[str], list[tuple[dict[str, Any], Any]]]:
    """Read (and remove) every message in a queue: (body, properties) pairs."""

    def read(queue: str) -> list[tuple[dict[str, Any], Any]]:
        return read_messages(url=amqp_vhost, queue=queue)

    return read
