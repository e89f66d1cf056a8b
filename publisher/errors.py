"""The errors of activity publishing: the broker's answers, the triggers, the direct trades."""

from __future__ import annotations

from config.errors import BrokerUnavailable, ConfigurationError, ErrorKind, KickoffError, NotFound


class PublishError(KickoffError):
    """Base class of the errors raised while publishing to RabbitMQ."""

    kind = ErrorKind.UNAVAILABLE


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


class TradeClaimAmbiguous(TradeError):
    """Raised when a trade key is claimed in more than one of the leagues a caller may name and the
    caller named none (409): the league picks the claim (``league_id``, ``--league``)."""


class TradeNotFound(NotFound):
    """Raised when no execution_log claim has the given key (on the queue, in the league or leagues
    asked about)."""
