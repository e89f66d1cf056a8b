"""The one exception tree of kickoff: every error we raise on purpose is a KickoffError.

Driver errors (psycopg2, redis, pika) are translated into these at the module that talks
to the driver, so code above that boundary never imports a driver's exceptions.
"""

from __future__ import annotations


class KickoffError(Exception):
    """Base class of every error kickoff raises on purpose."""


# -- configuration -----------------------------------------------------------------


class ConfigurationError(KickoffError):
    """Raised when a setting is missing or has a value kickoff cannot use."""


class InvalidTimeError(KickoffError, ValueError):
    """Raised when a time given to kickoff cannot be read as an ISO 8601 instant."""


class NaiveDatetimeError(InvalidTimeError):
    """Raised when a datetime without a timezone enters kickoff (every time is aware UTC)."""


# -- services ----------------------------------------------------------------------


class ServiceUnavailable(KickoffError):
    """Raised when a backing service (PostgreSQL, Redis, RabbitMQ) cannot be reached.

    The message names the setting and the address, with any password masked, so a CLI can
    print it as one line.
    """

    def __init__(self, *, service: str, setting: str, address: str, reason: str) -> None:
        self.service = service
        self.setting = setting
        self.address = address
        self.reason = reason
        super().__init__(f"cannot reach {service} at {setting}={address}: {reason}")


class DatabaseUnavailable(ServiceUnavailable):
    """Raised when PostgreSQL refuses or does not answer a connection."""


class RedisUnavailable(ServiceUnavailable):
    """Raised when Redis refuses or does not answer a command."""


class BrokerUnavailable(ServiceUnavailable):
    """Raised when RabbitMQ refuses or does not answer a connection."""


class MigrationError(KickoffError):
    """Raised when the schema migrations cannot be applied."""


# -- domain ------------------------------------------------------------------------


class NotFound(KickoffError):
    """Raised when a named row (match, league, run, ...) does not exist."""


class MatchNotFound(NotFound):
    """Raised when no Match has the given internal id (or Sportradar id where one is asked)."""


class LeagueNotFound(NotFound):
    """Raised when no League has the given name."""


class BarrierError(KickoffError):
    """Raised when a Redis lock operation is refused, e.g. releasing a lock we do not own."""


class LockNotOwned(BarrierError):
    """Raised when a token lock is released or extended by a holder whose token no longer matches."""


class ListenerError(KickoffError):
    """Base class of the errors raised while starting or running a match listener."""


class ListenerStartSettingsError(ListenerError):
    """Raised when start-time settings (overrides, Match.listener_start_settings) are invalid.

    A failed start: counted by the attempt counter like any other failure.
    """


class PublishError(KickoffError):
    """Base class of the errors raised while publishing to RabbitMQ."""
