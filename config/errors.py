"""The one exception tree of kickoff: every error we raise on purpose is a KickoffError.

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


# -- configuration -----------------------------------------------------------------


class ConfigurationError(KickoffError):
    """Raised when a setting is missing or has a value kickoff cannot use."""

    kind = ErrorKind.MISCONFIGURED


class InvalidTimeError(KickoffError, ValueError):
    """Raised when a time given to kickoff cannot be read as an ISO 8601 instant."""

    kind = ErrorKind.INVALID


class NaiveDatetimeError(InvalidTimeError):
    """Raised when a datetime without a timezone enters kickoff (every time is aware UTC)."""

    kind = ErrorKind.FAILED  # a bug in kickoff, not a caller's input


# -- services ----------------------------------------------------------------------


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


# -- domain ------------------------------------------------------------------------


class NotFound(KickoffError):
    """Raised when a named row (match, league, run, ...) does not exist."""

    kind = ErrorKind.NOT_FOUND


class MatchNotFound(NotFound):
    """Raised when no Match has the given internal id (or Sportradar id where one is asked)."""


class LeagueNotFound(NotFound):
    """Raised when no League has the given name."""


class BarrierError(KickoffError):
    """Raised when a Redis lock operation is refused, e.g. releasing a lock we do not own."""

    kind = ErrorKind.FAILED


class LockNotOwned(BarrierError):
    """Raised when a token lock is released or extended by a holder whose token no longer matches."""


class RedisCommandRefused(BarrierError):
    """Raised when Redis answers one command with an error about its data (e.g. WRONGTYPE: the key
    holds another kind of value): that key is wrong, the service is up."""


class ListenerError(KickoffError):
    """Base class of the errors raised while starting or running a match listener."""

    kind = ErrorKind.FAILED


class ListenerStartSettingsError(ListenerError):
    """Raised when start-time settings (overrides, Match.listener_start_settings) are invalid.

    A failed start: counted by the attempt counter like any other failure.
    """

    kind = ErrorKind.INVALID


class ListenerHeld(ListenerError):
    """Raised by ``kickoff listen`` when another listener already holds the match (nothing was started).

    ``holder`` describes it: ``record_id``, ``host`` and ``pid`` of its open row, or the start
    lock's ``token``, or ``pending`` when only a queued start is known.
    """

    kind = ErrorKind.CONFLICT

    def __init__(self, message: str, *, holder: dict[str, object]) -> None:
        super().__init__(message)
        self.holder = holder


class StartAttemptsExhausted(ListenerError):
    """Raised when a plain (not forced) start is asked for a match whose failed starts reached the
    attempt cap: a worker would skip it, so nothing is enqueued (HTTP 409, CLI exit 4). The
    message names ``--force``, which clears the attempts.
    """

    kind = ErrorKind.CONFLICT


class ListenerRunFailed(ListenerError):
    """Raised by the start_match_listener actor when a run ended with a failure exit (9, 11, 12, 16, ...).

    The failure is already recorded (row exit code, attempt counter); raising marks the Dramatiq
    message failed (it is not retried: max_retries=0).
    """


class WorkerLeaseUnavailable(ListenerError):
    """Raised when a listener run cannot start because its worker process holds no lease.

    The lease (lifecycle.lease) could not be taken or renewed: Redis does not answer. A failed
    start, counted like any other.
    """

    kind = ErrorKind.UNAVAILABLE


class StreamError(ListenerError):
    """Base class of the errors of a match listener's push stream."""


class StreamConnectionError(StreamError):
    """Raised when the push stream cannot be (re)connected or times out after every reconnect (exit 12)."""


class StreamDataError(StreamError):
    """Raised when the feed answers an HTTP error or data the listener cannot skip (exit 11)."""


class StreamResumeRefused(StreamConnectionError):
    """Raised when the feed refuses a reconnect's resume id (HTTP 410: window passed, too many missed,
    unknown id): the listener reconnects without it and backfills from the play-by-play."""


class PlayByPlayError(StreamError):
    """Raised when a game's play-by-play cannot be fetched or read (HTTP error, not JSON, events without
    ids): the backfill logs it, retries with backoff and never stops the live stream."""


class PlayByPlayUnavailable(ServiceUnavailable):
    """Raised when a verification or backfill outside a listener cannot get the game's play-by-play:
    the feed (SPORTRADAR_BASE_URL) does not answer (HTTP 503, CLI exit 5); nothing was stored."""

    kind = ErrorKind.UNAVAILABLE

    def __init__(self, reason: str, *, address: str = "") -> None:
        super().__init__(
            service="the feed's play-by-play", setting="SPORTRADAR_BASE_URL", address=address, reason=reason
        )


class PlayByPlayUnusable(PlayByPlayUnavailable):
    """Raised when the feed (SPORTRADAR_BASE_URL) answers a play-by-play kickoff cannot use (an HTTP
    error, not JSON, events without ids): HTTP 502, CLI exit 5; nothing was stored."""

    kind = ErrorKind.UPSTREAM


class BulkError(ListenerError):
    """Base class of the refusals of a bulk listener action (lifecycle.bulk); nothing was changed."""

    field: str | None = None


class BulkInvalid(BulkError, ValueError):
    """Raised when a bulk action is asked without what it needs: a reason, a known action, a filter
    naming a league or match ids (HTTP 422, CLI usage error); ``field`` names the field."""

    kind = ErrorKind.INVALID

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class BulkConflict(BulkError):
    """Raised when a bulk action cannot go on in the current state (HTTP 409, CLI exit 4): the filter
    matches more matches than one bulk act may touch, or the confirm is unknown, expired, already
    used or was issued for another action, filter or caller (preview again)."""

    kind = ErrorKind.CONFLICT

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ArchiveBusy(ListenerError):
    """Raised when a backfill outside a listener is asked for a match a listener may still own: it has
    an open lifecycle row or its start lock is held (HTTP 409, CLI exit 4); nothing was written."""

    kind = ErrorKind.CONFLICT


class FencedWrite(ListenerError):
    """Raised when a listener run's write carries a fencing token older than its match's current one:
    a successor run started (this one was paused past its lease); nothing was written (exit 16)."""

    kind = ErrorKind.FAILED


class ArchivePathError(ListenerError):
    """Raised when a league or shortcode would place a listener archive outside DATA_DIR (exit 11)."""

    kind = ErrorKind.NOT_FOUND


class ScheduleFetchError(KickoffError):
    """Raised when the feed's schedule API or a league document (hierarchy, teams, seasons) cannot be
    reached, answers an HTTP error, or answers something unreadable (not a JSON object, no league id)."""

    kind = ErrorKind.FAILED


class MalformedFeedEntry(KickoffError, ValueError):
    """Raised when one entry of a schedule or league document (a game, a team, a season) lacks what
    its row needs (an id, a readable time, text fields); the refresh sets that entry aside with this
    reason and goes on with the others."""

    kind = ErrorKind.FAILED


class SimulatorScriptError(KickoffError):
    """Raised when an srsim script file is missing, not JSON, or lacks a required field."""

    kind = ErrorKind.FAILED


class PublishError(KickoffError):
    """Base class of the errors raised while publishing to RabbitMQ."""

    kind = ErrorKind.UNAVAILABLE


# -- publisher (queues, outbox, triggers, trades) -----------------------------------


class BrokerConnectionError(PublishError, BrokerUnavailable):
    """Raised when RabbitMQ (AMQP_URL) refuses a connection or drops it before a publish is sent.

    Retryable: an outbox row stays pending and the drain publishes it later.
    """

    kind = ErrorKind.UNAVAILABLE


class MissingQueueError(PublishError, ConfigurationError):
    """Raised when a passive declare finds no such queue on the broker (``kickoff amqp setup``).

    A configuration error naming the queue; the outbox row stays pending and the channel is reopened.
    """

    kind = ErrorKind.UNAVAILABLE

    def __init__(self, queue: str, detail: str = "") -> None:
        self.queue = queue
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"queue {queue!r} does not exist on the broker{extra}; run `kickoff amqp setup` to declare it"
        )


class PublishRefusedError(PublishError):
    """Base class of the broker's refusals of one message (the broker was there and said no).

    Only these count towards OUTBOX_MAX_ATTEMPTS: an unreachable broker, a lost connection or a
    confirm that never came say nothing about the message, and a missing queue is configuration.
    """


class UnroutableMessageError(PublishRefusedError):
    """Raised when the broker returns a ``mandatory`` message although its queue exists."""


class UnencodableMessageError(PublishRefusedError):
    """Raised for a message AMQP cannot carry (a header value it has no type for, such as a float,
    or a number too large): it is never sent, and since it never will be, its outbox row is dead at once.
    """


class PublishNackedError(PublishRefusedError):
    """Raised when the broker answers a publish with basic.nack (it could not take the message)."""


class PublishUncertainError(PublishError):
    """Raised when a message was sent but the connection failed before its confirm arrived.

    The broker may or may not hold the message: outbox rows are retried (consumers drop the
    duplicate by message id); a trade claim waits as ``uncertain`` for an operator to reconcile it.
    """


class PlayerSyncError(KickoffError):
    """Raised when the players map cannot be read: source unreachable, not JSON, or not a map of players."""

    kind = ErrorKind.FAILED


class TriggerError(KickoffError):
    """Base class of errors a trigger (lineup, waiver, draft-pick, rumor-action) reports to its caller."""

    kind = ErrorKind.FAILED

    retryable = False


class TriggerValidationError(TriggerError, ValueError):
    """Raised before anything is saved when a trigger request is invalid (HTTP 422); names the field."""

    kind = ErrorKind.INVALID

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class TriggerReferenceNotFound(TriggerValidationError, NotFound):
    """Raised when a trigger names an action that does not exist (``after_tracking_id``; HTTP 404)."""

    kind = ErrorKind.NOT_FOUND


class TriggerConflictError(TriggerError):
    """Raised when a request conflicts with the current state, e.g. a filled or expired pick (HTTP 409)."""

    kind = ErrorKind.CONFLICT


class DeadDeliveryError(TriggerConflictError):
    """Raised when a key's action has a dead message (the broker refused it to the last attempt; HTTP 409).

    A retry with the same key cannot deliver it: revive the row with ``kickoff outbox retry-dead``
    after fixing the cause, or send the request with a new idempotency key. ``tracking_id`` names
    the action.
    """

    def __init__(self, message: str, *, tracking_id: str) -> None:
        self.tracking_id = tracking_id
        super().__init__(message)


class TriggerUnavailableError(TriggerError):
    """Raised when a trigger cannot be served right now (HTTP 503): retry with the same key.

    Examples: the parent of a chained claim cannot be read, a draft target was saved but its
    delivery failed (``tracking_id`` is then set).
    """

    kind = ErrorKind.UNAVAILABLE

    retryable = True

    def __init__(self, message: str, *, tracking_id: str | None = None) -> None:
        self.tracking_id = tracking_id
        super().__init__(message)


class ContractMismatch(KickoffError):
    """Raised when a trigger queue's declaration and its AsyncAPI channel disagree (names what)."""

    kind = ErrorKind.MISCONFIGURED


class ActionNotFound(NotFound):
    """Raised when no activity action has the given tracking id."""


class TradeError(KickoffError):
    """Base class of errors of the direct trade publishers and their reconciliation."""

    kind = ErrorKind.CONFLICT


class UnusableTradeClaim(TradeError):
    """Raised when a stored trade claim cannot be turned back into its message (not a trade queue,
    a body that is not an object or names another key); the trade drain sets such a claim aside."""


class TradeNotFound(NotFound):
    """Raised when no execution_log entry has the given key."""


# -- HTTP API ----------------------------------------------------------------------


class ApiKeyNotFound(NotFound):
    """Raised when no API key has the given id (``kickoff apikeys revoke``)."""


class Forbidden(KickoffError):
    """Raised when the acting key may not do this (another league, another key's action): HTTP 403."""

    kind = ErrorKind.REFUSED


class ApiRequestError(KickoffError):
    """Raised by the HTTP trigger client for a 4xx answer other than 422/409 (401, 403, 404, 413, 415)."""

    kind = ErrorKind.FAILED

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(f"HTTP {status}: {message}")


class ConsoleError(KickoffError):
    """Base class of the operator console's refusals (console/)."""

    kind = ErrorKind.REFUSED


class SignInRefused(ConsoleError):
    """Raised when a presented API key cannot open a console session (unknown, revoked, trigger scope)."""


class StreamLimitReached(ConsoleError):
    """Raised when a live board stream would pass CONSOLE_STREAMS_PER_SESSION or _PER_PROCESS (429)."""

    kind = ErrorKind.LIMITED


class ReasonRequired(ConsoleError, ValueError):
    """Raised when a console stop or force start comes without a reason (the audit log keeps it; 422)."""

    kind = ErrorKind.INVALID

    field = "reason"


class KeyNameTaken(KickoffError):
    """Raised when an API key would get a name another key has (case-insensitively): 409."""

    kind = ErrorKind.CONFLICT


class RateLimited(KickoffError):
    """Raised when an act that calls the provider is asked again too soon (archive verification): 429."""

    kind = ErrorKind.LIMITED


class InvalidText(KickoffError, ValueError):
    """Raised when operator text (a reason, a name) breaks the one text rule (config.text_rule): 422."""

    kind = ErrorKind.INVALID

    def __init__(self, message: str, *, field: str = "reason") -> None:
        super().__init__(message)
        self.field = field


class InvalidQuery(KickoffError, ValueError):
    """Raised when a board or history query has a value kickoff cannot use (an unknown filter value, a
    malformed date, a page past the end, an unknown range); ``field`` names the parameter (422)."""

    kind = ErrorKind.INVALID

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class SignInRequired(ConsoleError):
    """Raised when a console page is asked for without a live session (answered with the sign-in form)."""

    def __init__(self, next_path: str) -> None:
        super().__init__(f"sign in to see {next_path}")
        self.next_path = next_path


# -- job runs ----------------------------------------------------------------------


class RunError(KickoffError):
    """Base class of the errors raised by the job catalog, publish_run, the launcher and run_scope."""

    kind = ErrorKind.FAILED


class CatalogError(RunError, ConfigurationError):
    """Raised when the job catalog (JOB_CATALOG_PATH) cannot be read or does not validate.

    The message names the file and the first problem found, so it prints as one line.
    """

    kind = ErrorKind.MISCONFIGURED


class UnknownJob(RunError, NotFound):
    """Raised when publish_run is asked for a job the catalog does not declare."""

    kind = ErrorKind.INVALID


class InvalidRunParams(RunError, ValueError):
    """Raised when a run's params do not match the job's parameter schema in the catalog."""

    kind = ErrorKind.INVALID


class InvalidTrigger(RunError, ValueError):
    """Raised when publish_run gets a trigger without what its dedupe key needs (slot, chain root, key),
    or an event key / debounce that is out of bounds; ``field`` names the request field when known."""

    kind = ErrorKind.INVALID

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class RunNotFound(RunError, NotFound):
    """Raised when no run_log row has the given run id (CLI, run_scope adopting RUN_ID)."""

    kind = ErrorKind.NOT_FOUND


class InvalidRunCommand(RunError, ValueError):
    """Raised when a job_runs delivery or run outbox payload is not a RunCommand the launcher can
    start (the launcher sets the delivery aside on job_runs.XQ; the drain marks the row dead).

    ``refusal`` names it for metrics: not_json, invalid or unknown_job (runs.command).
    """

    kind = ErrorKind.FAILED

    def __init__(self, message: str, *, refusal: str = "invalid") -> None:
        self.refusal = refusal
        super().__init__(message)
