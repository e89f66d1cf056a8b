"""The one set of service probes: what ``kickoff check``, ``/readyz`` and ``/metrics`` ask each service.

Each ``Probe`` says which service it asks (its name on every surface), how (one round trip on the
surface's own handles, ``Services``), what bounds one ask, and what it says: ``at SETTING=<masked
address>`` when the service answers, the error's one line (naming the setting) when it does not.
Every surface formats the same answers its own way: ``kickoff check`` prints one line per probe
(exit 1 on a failure), ``/readyz`` answers ``ok`` or ``failing`` per service (the error goes to
the server's log, never into the answer) and ``/metrics`` exposes the last ``/readyz`` round as
``kickoff_readiness_service_ok{service}``. A probe fails on any ``KickoffError``: the drivers'
errors are translated where the stores and the transport call them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from config.errors import KickoffError
from config.settings import KickoffSettings, mask_url
from models.coordination import CoordinationStore
from models.db import check_connection
from publisher.amqp import AmqpPublisher
from publisher.queues import OUTBOX_QUEUES


@dataclass(frozen=True)
class Services:
    """A surface's own handles on the services, which the probes ask through."""

    settings: KickoffSettings
    #: Bind the model layer to DATABASE_URL if the surface has not yet (the API binds it at boot).
    bind_database: Callable[[], None]
    #: The surface's Redis coordination store on REDIS_URL.
    coordination: Callable[[], CoordinationStore]
    #: A publisher on AMQP_URL for the time of one probe (the API keeps one between probes).
    amqp: Callable[[], AbstractContextManager[AmqpPublisher]]


@dataclass(frozen=True)
class Probe:
    """One service: its name on every surface, the setting of its address, what bounds one ask, the ask."""

    name: str
    setting: str  # the KickoffSettings field of its address, upper case as in the environment
    timeout: str  # what bounds one ask when the service does not answer
    ask: Callable[[Services], None]  # one round trip; a KickoffError naming ``setting`` when it fails

    def address(self, settings: KickoffSettings) -> str:
        """What the probe says when the service answers: ``at SETTING=<address, password masked>``."""
        return f"at {self.setting}={mask_url(getattr(settings, self.setting.lower()))}"


@dataclass(frozen=True)
class ProbeAnswer:
    """One probe's answer: ``error`` None when the service answered."""

    probe: Probe
    error: KickoffError | None
    detail: str  # the address when it answered, else the error's line

    @property
    def ok(self) -> bool:
        return self.error is None


def _postgresql(services: Services) -> None:
    services.bind_database()
    check_connection(services.settings.database_url)


def _redis(services: Services) -> None:
    services.coordination().ping()


def _dramatiq_broker(services: Services) -> None:
    # Importing actors configures a worker's runtime (actors/__init__.py): only this probe needs it.
    from actors.broker import ping_broker  # noqa: PLC0415  see the line above

    ping_broker(services.settings)


def _rabbitmq(services: Services) -> None:
    with services.amqp() as publisher:
        for queue in OUTBOX_QUEUES:  # the outbox publishes with passive declares: they must exist
            publisher.check_queue(queue, again=True)


#: The services every kickoff process needs, in the order every surface shows them.
PROBES: tuple[Probe, ...] = (
    Probe("PostgreSQL", "DATABASE_URL", "DATABASE_CONNECT_TIMEOUT_SECONDS to connect", _postgresql),
    Probe("Redis", "REDIS_URL", "5 s to connect, 10 s per reply (models.coordination.connect_redis)", _redis),
    Probe(
        "Dramatiq broker",
        "BROKER_URL",
        "5 s to connect (Redis: models.coordination.connect_redis; RabbitMQ: publisher.amqp_link.AmqpLink)",
        _dramatiq_broker,
    ),
    Probe(
        "RabbitMQ",
        "AMQP_URL",
        "AMQP_CONNECT_TIMEOUT_SECONDS to connect, then one declare per queue",
        _rabbitmq,
    ),
)


def ask(probe: Probe, services: Services) -> ProbeAnswer:
    """Ask one service: its answer, the error kept when it fails."""
    try:
        probe.ask(services)
    except KickoffError as exc:
        return ProbeAnswer(probe, exc, str(exc))
    return ProbeAnswer(probe, None, probe.address(services.settings))


def ask_all(services: Services) -> list[ProbeAnswer]:
    """Ask every service of ``PROBES``, one after the other."""
    return [ask(probe, services) for probe in PROBES]
