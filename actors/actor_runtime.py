"""The actor runtime: one per process, configured once (settings, Redis coordination store, database, broker).

``actors/__init__.py`` calls ``configure`` with the KickoffSettings read at process start, before it
imports the actor modules; every actor reads ``current()`` when it runs, never a copy of its own.
A process that runs listeners reads its MatchListenerEnvironment once, when a listener worker boots
(``listener_settings``), and the runtime is configured again with it. A test process configures it
again with its run's settings: the broker is rebuilt only when BROKER_URL or BROKER_NAMESPACE
changed, and then every actor declared so far moves to it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import dramatiq

from actors.broker import build_broker, worker_hooks
from config.errors import ConfigurationError
from config.settings import KickoffSettings, MatchListenerEnvironment, listener_settings_of
from models.coordination import CoordinationStore
from models.db import init_database, pool_size

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ActorRuntime:
    """What every actor of this process runs with."""

    # Read once at process start (or set by a test): KickoffSettings (actors/__init__.py); in a process
    # that runs listeners, its MatchListenerEnvironment once read (``listener_settings``).
    settings: KickoffSettings
    coordination: CoordinationStore  # Redis keys on REDIS_URL under REDIS_KEY_PREFIX
    broker: dramatiq.Broker  # Dramatiq's global broker (actors.broker.build_broker)


_current: ActorRuntime | None = None
_mu = threading.Lock()
_listeners_mu = threading.Lock()


def _same_broker(a: KickoffSettings, b: KickoffSettings) -> bool:
    fields = ("broker_url", "broker_namespace", "broker_quorum_queues", "redis_url", "log_format")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def _pool_size(settings: KickoffSettings) -> int:
    """DATABASE_POOL_MAX_CONNECTIONS; unset, room for LISTENER_DB_CONCURRENCY where listeners run."""
    listener_slots = settings.listener_db_concurrency if isinstance(settings, MatchListenerEnvironment) else 0
    return pool_size(
        pool_max_connections=settings.database_pool_max_connections, listener_db_concurrency=listener_slots
    )


def configure(
    settings: KickoffSettings,
    *,
    broker: dramatiq.Broker | None = None,
    coordination: CoordinationStore | None = None,
) -> ActorRuntime:
    """Make ``settings`` this process's runtime: broker (set as Dramatiq's), database proxy, coordination.

    ``broker`` and ``coordination`` replace the ones ``settings`` select (tests: Dramatiq's
    ``StubBroker``, an in-memory coordination store); every actor declared so far moves to ``broker``.
    """
    global _current

    with _mu:
        old = _current
        if broker is None and old is not None and _same_broker(old.settings, settings):
            broker = old.broker
        elif broker is None or old is None or broker is not old.broker:
            broker = broker if broker is not None else build_broker(settings)
            if old is not None:
                for actor in list(old.broker.actors.values()):
                    actor.broker = broker
                    broker.declare_actor(actor)
                old_hooks, new_hooks = worker_hooks(old.broker), worker_hooks(broker)
                if old_hooks is not None and new_hooks is not None:
                    new_hooks.adopt(old_hooks)
        dramatiq.set_broker(broker)
        # pika logs every AMQP connection step at INFO; kickoff logs the failures it translates.
        # A level set before (the CLI silences pika unless -v) is kept.
        pika_logger = logging.getLogger("pika")
        if pika_logger.level == logging.NOTSET:
            pika_logger.setLevel(logging.WARNING)
        init_database(
            settings.database_url,
            connect_timeout_seconds=settings.database_connect_timeout_seconds,
            statement_timeout_seconds=settings.database_statement_timeout_seconds,
            pool_max_connections=_pool_size(settings),
            pool_max_age_seconds=settings.database_pool_max_age_seconds,
        )
        _current = ActorRuntime(
            settings=settings,
            coordination=coordination
            if coordination is not None
            else CoordinationStore.from_settings(settings),
            broker=broker,
        )
        return _current


def current() -> ActorRuntime:
    """The runtime ``configure`` set (importing ``actors`` configures it from the environment)."""
    runtime = _current
    if runtime is None:
        raise ConfigurationError("the actor runtime is not configured: import actors first")
    return runtime


def listener_settings() -> MatchListenerEnvironment:
    """The settings this process's listeners run with: the runtime's, once a MatchListenerEnvironment.

    The first call reads them (``listener_settings_of`` the runtime's KickoffSettings: the fields only
    a running listener reads, from the environment, then ``.env``, then defaults) and configures the
    runtime again with them, on the same broker and coordination store, its database pool now sized for
    LISTENER_DB_CONCURRENCY. A listener worker makes that call at boot, before its threads take a
    message (``actors.listeners.read_listener_settings``); a process that only sends messages never
    does. Raises ConfigurationError naming an invalid setting.
    """
    with _listeners_mu:
        runtime = current()
        if isinstance(runtime.settings, MatchListenerEnvironment):
            return runtime.settings
        settings = listener_settings_of(runtime.settings)
        configure(settings, broker=runtime.broker, coordination=runtime.coordination)
        return settings
