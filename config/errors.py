"""The root of kickoff's one exception tree: every error we raise on purpose is a KickoffError.

This module holds the base (``KickoffError``, ``ErrorKind``, ``kind_of``) and the errors every layer
shares: configuration and time, the services and the drivers' refusals, the generic refusals
(NotFound, AlreadyExists, Forbidden, InvalidQuery) and the text rules' errors (config.text_rule,
config.feed_text). A domain's errors live in the ``errors.py`` beside its package (``models.errors``,
``listener.errors``, ``publisher.errors``, ``lifecycle.errors``, ``runs.errors``, ``api.errors``, ...);
tests/test_boundaries.py keeps any other class out of here (``CONFIG_ERRORS``).

Driver errors (psycopg2, redis, pika) are translated into these at the module that talks
to the driver, so code above that boundary never imports a driver's exceptions.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar


class ErrorKind(StrEnum):
    """What kind of refusal or failure an error is: the one vocabulary of kickoff's answers.

    Every KickoffError class declares one (``kind``); the HTTP status (``api.errors.STATUS_OF``),
    the CLI exit code (``cli.answers.EXIT_OF``) and the console's notice (``api.errors.NOTICE_OF``)
    are derived from it, one table each.
    """

    INVALID = "invalid"  # the request or input is refused before anything changed (422, exit 3)
    NOT_FOUND = "not_found"  # a named thing does not exist (404, exit 2)
    CONFLICT = "conflict"  # the current state does not allow it; nothing was changed (409, exit 4)
    UNAVAILABLE = "unavailable"  # a service cannot be reached or does not answer: retry (503, exit 5)
    UPSTREAM = "upstream"  # an upstream answered something kickoff cannot use (502, exit 5)
    REFUSED = "refused"  # the acting key or session may not do this (403, exit 1)
    LIMITED = "limited"  # a limit on concurrent use is reached: retry later (429, exit 5)
    MISCONFIGURED = "misconfigured"  # a setting, the schema or a declaration is wrong (500, exit 1)
    FAILED = "failed"  # kickoff could not do it for another reason (500, exit 1)


class KickoffError(Exception):
    """Base class of every error kickoff raises on purpose.

    It declares no kind: each branch does (tests/test_boundaries.py forbids a class without one).
    """

    kind: ClassVar[ErrorKind]


def kind_of(exc: BaseException | type[BaseException]) -> ErrorKind:
    """The kind of a KickoffError (or its class); FAILED for anything else (a bug, a driver's error)."""
    kind = getattr(exc, "kind", None)
    return kind if isinstance(kind, ErrorKind) else ErrorKind.FAILED


# -- configuration ---------------------------------------------------------------------


class ConfigurationError(KickoffError):
    """Raised when a setting is missing or has a value kickoff cannot use."""

    kind = ErrorKind.MISCONFIGURED


class InvalidTimeError(KickoffError, ValueError):
    """Raised when a time given to kickoff cannot be read as an ISO 8601 instant."""

    kind = ErrorKind.INVALID


class NaiveDatetimeError(InvalidTimeError):
    """Raised when a datetime without a timezone enters kickoff (every time is aware UTC)."""

    kind = ErrorKind.FAILED  # a bug in kickoff, not a caller's input


# -- services --------------------------------------------------------------------------


class ServiceUnavailable(KickoffError):
    """Raised when a backing service (PostgreSQL, Redis, RabbitMQ) cannot be reached.

    The message names the setting and the address, with any password masked, so a CLI can
    print it as one line.
    """

    kind = ErrorKind.UNAVAILABLE

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


class DatabaseNotMigrated(KickoffError):
    """Raised when PostgreSQL answers but kickoff's tables are missing: run ``kickoff db migrate``."""

    kind = ErrorKind.MISCONFIGURED


class MigrationError(KickoffError):
    """Raised when the schema migrations cannot be applied."""

    kind = ErrorKind.FAILED


class DatabaseRefused(KickoffError):
    """Raised when PostgreSQL answers one statement with a refusal (a constraint, a lock or statement
    timeout): the statement changed nothing, the connection is still usable."""

    kind = ErrorKind.FAILED


class ConstraintViolation(DatabaseRefused):
    """Raised when a write breaks a constraint (most often a unique key: another writer was first)."""


class BarrierError(KickoffError):
    """Raised when a Redis lock operation is refused, e.g. releasing a lock we do not own."""

    kind = ErrorKind.FAILED


class LockNotOwned(BarrierError):
    """Raised when a token lock is released or extended by a holder whose token no longer matches."""


class RedisCommandRefused(BarrierError):
    """Raised when Redis answers one command with an error about its data (e.g. WRONGTYPE: the key
    holds another kind of value): that key is wrong, the service is up."""


# -- refusals every layer raises -------------------------------------------------------


class NotFound(KickoffError):
    """Raised when a named row (match, league, run, ...) does not exist."""

    kind = ErrorKind.NOT_FOUND


class AlreadyExists(KickoffError):
    """Raised when a named thing to create exists already; nothing was created (409)."""

    kind = ErrorKind.CONFLICT


class Forbidden(KickoffError):
    """Raised when the acting key may not do this (another league, another key's action): HTTP 403."""

    kind = ErrorKind.REFUSED


class InvalidQuery(KickoffError, ValueError):
    """Raised when a board or history query has a value kickoff cannot use (an unknown filter value, a
    malformed date, a page past the end, an unknown range); ``field`` names the parameter (422)."""

    kind = ErrorKind.INVALID

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


# -- text rules (config.text_rule, config.feed_text) -----------------------------------


class InvalidText(KickoffError, ValueError):
    """Raised when operator text (a reason, a name) breaks the one text rule (config.text_rule): 422."""

    kind = ErrorKind.INVALID

    def __init__(self, message: str, *, field: str = "reason") -> None:
        super().__init__(message)
        self.field = field


# ConsoleError is the console's base, but config.text_rule raises ReasonRequired, one of its classes:
# both stay here (config imports no package above it). The console's other errors are in api.errors.
class ConsoleError(KickoffError):
    """Base class of the operator console's refusals (console/)."""

    kind = ErrorKind.REFUSED


class ReasonRequired(ConsoleError, ValueError):
    """Raised when a console stop or force start comes without a reason (the audit log keeps it; 422)."""

    kind = ErrorKind.INVALID

    field = "reason"


class MalformedFeedEntry(KickoffError, ValueError):
    """Raised when one entry of a schedule or league document (a game, a team, a season) lacks what
    its row needs (an id, a readable time, text fields); the refresh sets that entry aside with this
    reason and goes on with the others."""

    kind = ErrorKind.FAILED
