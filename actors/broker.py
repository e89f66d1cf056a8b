"""The Dramatiq broker of kickoff: Redis or RabbitMQ by BROKER_URL's scheme, its two queues and middleware.

How to declare an actor (every module under ``actors/``)::

    import dramatiq

    from actors.broker import QUEUE_DEFAULT
    from actors.actor_runtime import current

    @dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
    def drain_outbox(max_seconds: float | None = None) -> dict:
        rt = current()  # settings, coordination store and broker of this process
        ...  # thin: call a library function with rt.settings, return a small JSON-able dict

Rules:

* Use the bare ``@dramatiq.actor`` decorator: it binds to the broker that ``actors/__init__.py``
  configured (``actors.actor_runtime.configure``) before importing the actor modules. Never build a
  broker yourself; read settings and the coordination store from ``actors.actor_runtime.current()``,
  never keep a copy.
* ``queue_name=QUEUE_DEFAULT`` for everything (dispatch, sweep, stop, refresh, drain, job
  runs); ``QUEUE_MATCH_LISTENERS`` is reserved for ``start_match_listener``, whose messages
  occupy a worker thread for a whole game.
* Add one explicit ``from actors import <module>`` line in ``actors/__init__.py``.
* The database is bound (``init_database``) before any actor runs and the connection of the
  worker thread is closed after every message (DatabaseConnectionMiddleware).
* Periodic actors are not declared here: add a row to ``scheduler/table.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.errors import BrokerConnectionError as DramatiqConnectionError
from dramatiq.middleware import CurrentMessage

from actors.draining import INNER_CONSUMER_IDLE_MS, LISTENER_CONSUMER_IDLE_MS, DrainableConsumer
from actors.middleware import (
    DatabaseConnectionMiddleware,
    LogContextMiddleware,
    ScheduledTickMiddleware,
    TracingMiddleware,
    WorkerHooks,
    WorkerPresence,
)
from actors.prometheus import LoopbackPrometheus
from actors.rabbitmq import RABBITMQ_SERVICE, KickoffRabbitmqBroker, queue_depths, unavailable
from config import tracing
from config.settings import KickoffSettings
from models import presence
from models.audit import AuditContext
from models.coordination import connect_redis, redis_errors
from publisher.amqp_link import amqp_errors

QUEUE_DEFAULT = "default"  # dispatch, sweep, stop, refresh, drain, job runs
QUEUE_MATCH_LISTENERS = "match_listeners"  # start_match_listener only: one thread per live game
QUEUES = (QUEUE_DEFAULT, QUEUE_MATCH_LISTENERS)


class KickoffRedisBroker(RedisBroker):
    """RedisBroker whose ``match_listeners`` consumer takes no more starts than the worker has threads.

    Dramatiq prefetches twice the thread count; a start occupies its thread for a whole game, so
    a worker whose threads are all busy would hold starts that other workers could run. Here a
    running start stays unacked until its game ends, so a prefetch of one per thread means a full
    worker takes nothing more. A draining worker (a graceful shutdown) fetches no start at all.
    """

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> dramatiq.Consumer:
        if queue_name != QUEUE_MATCH_LISTENERS:
            return super().consume(queue_name, prefetch, timeout)
        prefetch = max(1, prefetch // 2)  # Dramatiq asks for 2 x --threads
        # An idle consumer waits at most LISTENER_CONSUMER_IDLE_MS between fetches, and not at all once
        # this process sent a start (a reaper's takeover): Dramatiq's own back-off is cut to nothing.
        inner = super().consume(queue_name, prefetch, min(timeout, INNER_CONSUMER_IDLE_MS))
        return DrainableConsumer(
            inner,
            idle_seconds=min(timeout, LISTENER_CONSUMER_IDLE_MS) / 1000,
            broker_errors=lambda: broker_errors(self),
        )


def is_rabbitmq(broker_url: str) -> bool:
    """Whether BROKER_URL selects the RabbitMQ broker (amqp:// or amqps://)."""
    return urlsplit(broker_url).scheme.lower() in ("amqp", "amqps")


def build_broker(settings: KickoffSettings) -> dramatiq.Broker:
    """Return the broker BROKER_URL selects, with kickoff's middleware and both queues declared.

    redis:// gives a RedisBroker under BROKER_NAMESPACE; amqp:// a RabbitmqBroker (actors.rabbitmq)
    whose queues are durable, ``match_listeners`` a quorum queue with BROKER_QUORUM_QUEUES.
    Nothing connects here: both open their connections on first use.
    """
    broker: dramatiq.Broker
    if is_rabbitmq(settings.broker_url):
        quorum = frozenset({QUEUE_MATCH_LISTENERS}) if settings.broker_quorum_queues else frozenset()
        broker = KickoffRabbitmqBroker(
            url=settings.broker_url,
            quorum_queues=quorum,
            early_ack_queues=frozenset({QUEUE_MATCH_LISTENERS}),
            heartbeat_seconds=max(1, round(settings.broker_heartbeat_timeout_seconds / 2)),
        )
        presence_client = connect_redis(settings.redis_url)  # worker marks live beside the locks
    else:
        broker = KickoffRedisBroker(
            url=settings.broker_url,
            namespace=settings.broker_namespace,
            heartbeat_timeout=int(settings.broker_heartbeat_timeout_seconds * 1000),
            maintenance_chance=settings.broker_maintenance_chance,
        )
        broker.kickoff_url = settings.broker_url  # type: ignore[attr-defined]  # for broker_errors
        presence_client = broker.client
    broker.add_middleware(CurrentMessage())
    if tracing.enabled():  # before the others: their work in a message runs inside its span
        broker.add_middleware(TracingMiddleware())
    broker.add_middleware(ScheduledTickMiddleware(skip_delay=settings.periodic_skip_delay_seconds))
    broker.add_middleware(LogContextMiddleware(log_format=str(settings.log_format)))
    broker.add_middleware(DatabaseConnectionMiddleware())
    broker.add_middleware(WorkerHooks())
    broker.add_middleware(
        WorkerPresence(
            client=presence_client,
            namespace=settings.broker_namespace,
            ttl_seconds=settings.worker_presence_ttl_seconds,
        )
    )
    if settings.dramatiq_prometheus:
        # Dramatiq's own metrics (messages, errors, durations per actor); the master process
        # forks an exposition server on dramatiq_prom_host:dramatiq_prom_port (default 9191).
        # actors/prometheus.py: on 127.0.0.1 unless dramatiq_prom_host names another address.

        broker.add_middleware(LoopbackPrometheus())
    for queue in QUEUES:
        broker.declare_queue(queue)
    return broker


@contextlib.contextmanager
def broker_errors(broker: dramatiq.Broker) -> Iterator[None]:
    """Errors of ``broker`` (sends, queue reads) as RedisUnavailable / BrokerUnavailable naming BROKER_URL."""
    url = getattr(broker, "kickoff_url", None) or "<unset>"
    if not isinstance(broker, RedisBroker) and is_rabbitmq(url):
        try:
            # Dramatiq's RabbitmqBroker lets some of pika's errors through: the transport names them
            with amqp_errors(url=url, setting="BROKER_URL", service=RABBITMQ_SERVICE):
                yield
        except DramatiqConnectionError as exc:
            raise unavailable(url, exc) from exc
        return
    with redis_errors(url=url, setting="BROKER_URL", service="the Dramatiq broker (Redis)"):
        yield


def send_to_actor(
    actor: dramatiq.Actor, kwargs: dict[str, Any], *, audit: AuditContext | None = None
) -> dramatiq.Message:
    """Send one message to ``actor`` on its queue (``kickoff enqueue``); the broker's errors name BROKER_URL.

    With ``audit``, the send is audited (actor.enqueue: its keyword arguments and queue) before it: an
    entry that cannot be written refuses it.
    """
    if audit is not None:
        audit.record(
            "actor.enqueue", "actor", actor.actor_name, after={"kwargs": kwargs, "queue": actor.queue_name}
        )
    with broker_errors(actor.broker):
        return actor.send_with_options(kwargs=kwargs)


def worker_hooks(broker: dramatiq.Broker) -> WorkerHooks | None:
    """The WorkerHooks middleware of ``broker`` (None on a broker without it)."""
    for middleware in broker.middleware:
        if isinstance(middleware, WorkerHooks):
            return middleware
    return None


def ping_broker(settings: KickoffSettings) -> None:
    """Raise RedisUnavailable / BrokerUnavailable (naming BROKER_URL) unless the broker answers."""
    if is_rabbitmq(settings.broker_url):
        queue_reports(settings, queues=(QUEUE_DEFAULT,))
        return
    with redis_errors(url=settings.broker_url, setting="BROKER_URL", service="the Dramatiq broker (Redis)"):
        connect_redis(settings.broker_url).ping()


def queue_reports(
    settings: KickoffSettings, *, queues: tuple[str, ...] = QUEUES
) -> list[presence.QueueReport]:
    """Workers alive and waiting, delayed and dead-lettered messages of each queue, on either broker.

    Worker marks live in the broker's Redis, or in REDIS_URL's with the RabbitMQ broker; RabbitMQ
    counts ready messages (a delivery a worker holds is not waiting).
    """
    ttl = settings.worker_presence_ttl_seconds
    if not is_rabbitmq(settings.broker_url):
        with redis_errors(
            url=settings.broker_url, setting="BROKER_URL", service="the Dramatiq broker (Redis)"
        ):
            client = connect_redis(settings.broker_url)
            return [
                presence.queue_report(client, settings.broker_namespace, q, ttl_seconds=ttl) for q in queues
            ]

    depths = {q: queue_depths(settings.broker_url, q) for q in queues}  # BrokerUnavailable naming BROKER_URL
    with redis_errors(url=settings.redis_url):
        client = connect_redis(settings.redis_url)
        workers = {
            q: presence.workers_alive(client, settings.broker_namespace, q, ttl_seconds=ttl) for q in queues
        }
    return [
        presence.QueueReport(queue=q, workers=workers[q], waiting=w, delayed=d, dead=x)
        for q, (w, d, x) in depths.items()
    ]
