"""The Dramatiq broker of kickoff: a RedisBroker on BROKER_URL, its two queues and middleware.

How to declare an actor (every module under ``actors/``)::

    import logging

import dramatiq
    from actors.broker import QUEUE_DEFAULT

    @dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
    def drain_outbox(limit: int = 500) -> dict:
        ...  # thin: call a library function, return a small JSON-able dict

Rules:

* Use the bare ``@dramatiq.actor`` decorator: it binds to the broker that ``actors/__init__.py``
  set with ``setup_broker`` before importing the actor modules. Never build a broker yourself.
* ``queue_name=QUEUE_DEFAULT`` for everything (dispatch, sweep, stop, refresh, drain, job
  runs); ``QUEUE_MATCH_LISTENERS`` is reserved for ``start_match_listener``, whose messages
  occupy a worker thread for a whole game.
* Add one explicit ``from actors import <module>`` line in ``actors/__init__.py``.
* The database is bound (``init_database``) before any actor runs and the connection of the
  worker thread is closed after every message (DatabaseConnectionMiddleware).
* Periodic actors are not declared here: add a row to ``scheduler/table.py``.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import CurrentMessage

from actors.middleware import (
    DatabaseConnectionMiddleware,
    LogContextMiddleware,
    ScheduledTickMiddleware,
    WorkerHooks,
    WorkerPresence,
)
from config.settings import MatchListenerEnvironment
from models.db import init_database

QUEUE_DEFAULT = "default"  # dispatch, sweep, stop, refresh, drain, job runs
QUEUE_MATCH_LISTENERS = "match_listeners"  # start_match_listener only: one thread per live game
QUEUES = (QUEUE_DEFAULT, QUEUE_MATCH_LISTENERS)


def build_broker(settings: MatchListenerEnvironment) -> RedisBroker:
    """Return a RedisBroker on BROKER_URL under BROKER_NAMESPACE with kickoff's middleware.

    Nothing connects here: the Redis client opens its connection on the first command.
    """
    broker = RedisBroker(
        url=settings.broker_url,
        namespace=settings.broker_namespace,
        heartbeat_timeout=int(settings.broker_heartbeat_timeout_seconds * 1000),
        maintenance_chance=settings.broker_maintenance_chance,
    )
    broker.kickoff_url = settings.broker_url  # type: ignore[attr-defined]  # for broker_errors
    broker.add_middleware(CurrentMessage())
    broker.add_middleware(ScheduledTickMiddleware(skip_delay=settings.periodic_skip_delay_seconds))
    broker.add_middleware(LogContextMiddleware(log_format=str(settings.log_format)))
    broker.add_middleware(DatabaseConnectionMiddleware())
    broker.add_middleware(WorkerHooks())
    broker.add_middleware(
        WorkerPresence(namespace=settings.broker_namespace, ttl_seconds=settings.worker_presence_ttl_seconds)
    )
    if settings.dramatiq_prometheus:
        # Dramatiq's own metrics (messages, errors, durations per actor); the master process
        # forks an exposition server on dramatiq_prom_host:dramatiq_prom_port (default 9191).
        from dramatiq.middleware.prometheus import Prometheus

        broker.add_middleware(Prometheus())
    for queue in QUEUES:
        broker.declare_queue(queue)
    return broker


def setup_broker(settings: MatchListenerEnvironment) -> RedisBroker:
    """Build the broker, make it Dramatiq's global broker and bind the database proxy."""
    broker = build_broker(settings)
    dramatiq.set_broker(broker)
    # pika logs every AMQP connection step at INFO; kickoff logs the failures it translates.
    logging.getLogger("pika").setLevel(logging.WARNING)
    init_database(
        settings.database_url,
        connect_timeout_seconds=settings.database_connect_timeout_seconds,
        statement_timeout_seconds=settings.database_statement_timeout_seconds,
    )
    return broker


def broker_errors(broker: dramatiq.Broker) -> AbstractContextManager[None]:
    """Redis errors of ``broker`` (sends, queue reads) as RedisUnavailable naming BROKER_URL."""
    from models.barriers import redis_errors

    url = getattr(broker, "kickoff_url", None) or "<unset>"
    return redis_errors(url=url, setting="BROKER_URL", service="the Dramatiq broker (Redis)")


def worker_hooks(broker: dramatiq.Broker) -> WorkerHooks | None:
    """The WorkerHooks middleware of ``broker`` (None on a broker without it)."""
    for middleware in broker.middleware:
        if isinstance(middleware, WorkerHooks):
            return middleware
    return None
