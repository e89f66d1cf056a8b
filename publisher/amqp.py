"""A confirming, mandatory, pipelined RabbitMQ publisher on kickoff's AMQP transport (publisher.amqp_link).

Every message goes to the default exchange with the queue name as routing key, as persistent
JSON with a message id, ``mandatory=True`` and publisher confirms. A batch is published in one
go and then all its confirms are awaited, so throughput is not one round trip per message.
publisher.amqp_link drives pika's public SelectConnection API and is the one module that
translates pika's errors; this module turns the broker's answers into PublishOutcomes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from config import spans, tracing
from config.settings import KickoffSettings
from publisher.amqp_link import AmqpLink, BatchResult, Publication
from publisher.errors import (
    BrokerConnectionError,
    MissingQueueError,
    PublishError,
    PublishNackedError,
    PublishUncertainError,
    UnroutableMessageError,
)
from publisher.queues import declare_passive

logger = logging.getLogger(__name__)

CONTENT_TYPE = "application/json"


@dataclass(frozen=True)
class OutgoingMessage:
    """One message to publish: its queue, JSON body, message id and AMQP headers."""

    queue: str
    body: dict[str, Any]
    message_id: str
    headers: dict[str, Any] = field(default_factory=dict)
    raw: bytes | None = None  # the body already encoded (the drain reads it as text from PostgreSQL)

    def encoded(self) -> bytes:
        """The body as UTF-8 JSON (``raw`` when given, else compact JSON of ``body``)."""
        if self.raw is not None:
            return self.raw
        return json.dumps(self.body, separators=(",", ":"), default=str).encode()


@dataclass(frozen=True)
class PublishOutcome:
    """The broker's answer for one message: confirmed (error None) or the PublishError."""

    message: OutgoingMessage
    error: PublishError | None = None

    @property
    def confirmed(self) -> bool:
        return self.error is None


@dataclass(kw_only=True, eq=False, repr=False)
class AmqpPublisher:
    """A lazily connected publisher on AMQP_URL; reconnects after a broker outage.

    Not thread-safe: give each thread its own publisher. ``close()`` when done.
    """

    url: str
    confirm_timeout: float = 10.0
    connect_timeout: float = 5.0
    heartbeat: int = 30
    passive_queues: Iterable[str] = ()  # declared by their owner: only checked here

    def __post_init__(self) -> None:
        self.passive_queues = frozenset(self.passive_queues)
        self.link = AmqpLink(
            url=self.url,
            connect_timeout=self.connect_timeout,
            heartbeat=self.heartbeat,
            blocked_timeout=self.confirm_timeout,
        )
        self._checked: set[str] = set()

    def _ensure_open(self) -> None:
        """Reconnect if needed; an idle connection the broker dropped is noticed here, before a send."""
        if not self.link.is_open:
            self._checked.clear()
        self.link.open()

    def close(self) -> None:
        """Close the connection (a later publish reconnects)."""
        self._checked.clear()
        self.link.close()

    def __enter__(self) -> AmqpPublisher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- queues ---------------------------------------------------------------------

    def check_queue(self, queue: str, *, again: bool = False) -> None:
        """Make sure ``queue`` takes messages: passive declare (outbox, ``passive_queues``), else durable.

        A queue checked before on this connection is not asked again unless ``again`` (readiness
        probes ask every time). A missing queue raises MissingQueueError naming it; the channel
        the broker closed is reopened so the publisher keeps working.
        """
        self._ensure_open()
        if queue in self._checked and not again:
            return
        passive = declare_passive(queue) or queue in self.passive_queues
        try:
            self.link.declare(queue, passive=passive, durable=True)
        except BrokerConnectionError:
            self._checked.clear()
            raise
        self._checked.add(queue)

    def declare_durable(self, queues: Iterable[str]) -> list[str]:
        """Declare ``queues`` durable (``kickoff amqp setup``); returns the names declared."""
        self._ensure_open()
        done = []
        for queue in queues:
            self.link.declare(queue, passive=False, durable=True)
            self._checked.add(queue)
            done.append(queue)
        return done

    def delete_queue(self, queue: str) -> None:
        """Delete ``queue`` (tests and operator clean-up)."""
        self._ensure_open()
        self.link.delete(queue)
        self._checked.discard(queue)

    # -- publishing -------------------------------------------------------------------

    def publish(self, message: OutgoingMessage) -> None:
        """Publish one message and wait for its confirm; raise the PublishError if not confirmed."""
        outcome = self.publish_many([message])[0]
        if outcome.error is not None:
            raise outcome.error

    def publish_many(
        self, messages: Sequence[OutgoingMessage], *, traced: bool = True
    ) -> list[PublishOutcome]:
        """Publish ``messages`` back to back, then wait for all confirms; one outcome per message.

        While tracing is on each message is published in its own span (``publish_spans``), whose
        context its ``traceparent`` header carries. ``traced=False``: the span each message's header
        names is still open and records this publish itself (a trigger's span: its ``kickoff.status``
        says whether the broker confirmed it), so no publish span is made and the headers go as they are.
        """
        if not traced or not tracing.enabled():
            return self._publish_many(messages)
        traced, opened = publish_spans(messages)
        outcomes: list[PublishOutcome] = []
        try:
            outcomes = self._publish_many(traced)
        finally:
            end_publish_spans(opened, outcomes)
        return outcomes

    def _publish_many(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        """``publish_many`` without spans.

        Messages for a missing queue get MissingQueueError and are not sent, nor is a message AMQP
        cannot encode (UnencodableMessageError, the others go out). A connection that fails before
        a message is sent gives BrokerConnectionError; after it was sent and before its confirm,
        PublishUncertainError.
        """
        if not messages:
            return []
        errors: dict[str, PublishError] = {}
        try:
            self._ensure_open()
        except BrokerConnectionError as exc:
            return [PublishOutcome(m, exc) for m in messages]
        sendable: list[OutgoingMessage] = []
        for queue in dict.fromkeys(m.queue for m in messages):
            try:
                self.check_queue(queue)
            except PublishError as exc:
                for m in messages:
                    if m.queue == queue:
                        errors[m.message_id] = exc
                continue
            sendable.extend(m for m in messages if m.queue == queue)
        if sendable:
            timestamp = int(time.time())
            publications = [
                Publication(
                    queue=m.queue,
                    body=m.encoded(),
                    message_id=m.message_id,
                    headers=dict(m.headers) or None,
                    content_type=CONTENT_TYPE,
                    timestamp=timestamp,
                )
                for m in sendable
            ]
            result = self.link.publish_batch(publications, confirm_timeout=self.confirm_timeout)
            errors.update(self._errors_of(sendable, result))
        return [PublishOutcome(m, errors.get(m.message_id)) for m in messages]

    def _errors_of(self, sendable: Sequence[OutgoingMessage], result: BatchResult) -> dict[str, PublishError]:
        """The PublishError of each message of a sent batch that was not confirmed as delivered."""
        errors: dict[str, PublishError] = dict(result.unencodable)
        if result.lost:
            self._checked.clear()
            for m in sendable:
                if m.message_id in result.unencodable:
                    continue
                if m.message_id in result.acked and m.message_id not in result.returned:
                    continue
                if m.message_id in result.sent:
                    errors[m.message_id] = PublishUncertainError(
                        f"message {m.message_id} to {m.queue} sent but not confirmed: {result.lost_reason}"
                    )
                else:
                    errors[m.message_id] = self.link.unavailable(ConnectionError(result.lost_reason))
            return errors
        missing = self._missing_after_return({m.queue for m in sendable if m.message_id in result.returned})
        for m in sendable:
            if m.message_id in result.returned:
                if m.queue in missing:
                    errors[m.message_id] = missing[m.queue]
                    continue
                errors[m.message_id] = UnroutableMessageError(
                    f"message {m.message_id} to {m.queue} was returned: {result.returned[m.message_id]}"
                )
            elif m.message_id in result.nacked:
                errors[m.message_id] = PublishNackedError(
                    f"message {m.message_id} to {m.queue} was nacked by the broker"
                )
        return errors

    def _missing_after_return(self, queues: set[str]) -> dict[str, PublishError]:
        """Check again the queues of returned messages: a queue deleted meanwhile is a missing queue
        (configuration), not a refusal of the message; an unreachable broker is unavailability."""
        found: dict[str, PublishError] = {}
        for queue in queues:
            self._checked.discard(queue)
            try:
                self.check_queue(queue)
            except (MissingQueueError, BrokerConnectionError) as exc:
                found[queue] = exc
            except PublishError:
                continue
        return found


def publish_spans(messages: Sequence[OutgoingMessage]) -> tuple[list[OutgoingMessage], list[Any]]:
    """One ``<queue> publish`` span (kind producer) per message, and the messages with its context.

    A span's parent is the context in its message's ``traceparent`` header (the context its outbox
    row, claim or run was saved in), else the current span; the message then carries the publish
    span's own ``traceparent`` (and ``tracestate``), so the consumer's spans join the trace. A header
    that names no valid context is replaced all the same: a caller's value is never passed on as is.
    """
    if not tracing.enabled():
        return list(messages), []
    traced: list[OutgoingMessage] = []
    opened: list[Any] = []
    for message in messages:
        current = spans.start_span(
            f"{message.queue} publish",
            parent=message.headers,
            kind=spans.SpanKind.PRODUCER,
            attributes={
                "messaging.system": "rabbitmq",
                "messaging.operation.type": "send",
                "messaging.destination.name": message.queue,
                "messaging.message.id": message.message_id,
            },
        )
        headers = {k: v for k, v in message.headers.items() if k not in (spans.TRACEPARENT, spans.TRACESTATE)}
        traced.append(replace(message, headers={**headers, **spans.headers_of(current)}))
        opened.append(current)
    return traced, opened


def end_publish_spans(opened: Sequence[Any], outcomes: Sequence[PublishOutcome]) -> None:
    """End each publish span with its message's outcome (an error: the span failed); no outcome: lost."""
    for n, current in enumerate(opened):
        outcome = outcomes[n] if n < len(outcomes) else None
        spans.end_span(current, error=outcome.error if outcome is not None else "not published")


def read_messages(*, url: str, queue: str, limit: int = 10_000) -> list[tuple[dict[str, Any], Any]]:
    """Drain up to ``limit`` messages from ``queue`` (tests, contract checks): (body, properties) pairs."""
    link = AmqpLink(url=url, confirms=False)
    out: list[tuple[dict[str, Any], Any]] = []
    try:
        while len(out) < limit:
            got = link.get(queue)
            if got is None:
                break
            properties, body = got
            out.append((json.loads(body), properties))
    finally:
        link.close()
    return out


def publisher_from_settings(settings: KickoffSettings) -> AmqpPublisher:
    """An AmqpPublisher on AMQP_URL with the configured confirm and connect timeouts."""
    return AmqpPublisher(
        url=settings.amqp_url,
        confirm_timeout=settings.amqp_confirm_timeout_seconds,
        connect_timeout=settings.amqp_connect_timeout_seconds,
    )
