"""A confirming, mandatory, pipelined RabbitMQ publisher (pika's private API only via publisher.pika_compat).

Every message goes to the default exchange with the queue name as routing key, as persistent
JSON with a message id, ``mandatory=True`` and publisher confirms. A batch is published in one
go and then all its confirms are awaited (delivery tags tracked here), so throughput is not one
round trip per message. pika errors are translated into ``config.errors`` PublishError
subclasses here. runs.consumer (the launcher's consumer) is the other module that uses
pika; nothing above the publisher imports it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pika
import pika.exceptions
import pika.frame
import pika.spec
from pika.adapters.utils.connection_workflow import AMQPConnectorException

from config.errors import (
    BrokerConnectionError,
    MissingQueueError,
    PublishError,
    PublishNackedError,
    PublishUncertainError,
    UnencodableMessageError,
    UnroutableMessageError,
)
from config.settings import mask_url
from publisher import pika_compat
from publisher.queues import declare_passive

logger = logging.getLogger(__name__)

CONTENT_TYPE = "application/json"
PERSISTENT = 2
# how often a wait for confirms wakes to check its deadline when the broker sends nothing
CONFIRM_POLL_SECONDS = 0.2

_BODY_FRAME = struct.Struct(">BHI")  # frame type, channel, size (AMQP 0-9-1 general frame header)
#: What encoding a message AMQP cannot carry raises (pika's field and string checks, struct's range).
_ENCODING_ERRORS = (pika.exceptions.AMQPError, struct.error, TypeError, ValueError)
_FRAME_END = bytes([pika.spec.FRAME_END])

#: Every way pika reports a broker it cannot reach or talk to. A connect that times out during
#: the AMQP handshake (a black-holed link) raises AMQPConnectorStackTimeout, which is neither an
#: AMQPError nor an OSError.
PIKA_ERRORS: tuple[type[BaseException], ...] = (pika.exceptions.AMQPError, OSError, AMQPConnectorException)


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


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
        self._connection: pika.BlockingConnection | None = None
        self._channel: Any = None
        self._checked: set[str] = set()
        # delivery tag -> message id, of the batch being confirmed
        self._unconfirmed: dict[int, str] = {}
        self._acked: set[str] = set()
        self._nacked: set[str] = set()
        self._returned: dict[str, str] = {}
        self._unencodable: dict[str, PublishError] = {}  # of the batch being sent: never sent
        self._next_tag = 0

    # -- connection and channel ---------------------------------------------------

    def _unavailable(self, exc: BaseException) -> BrokerConnectionError:
        return BrokerConnectionError(
            service="RabbitMQ", setting="AMQP_URL", address=mask_url(self.url), reason=_reason(exc)
        )

    def _connect(self) -> None:
        params = pika.URLParameters(self.url)
        params.socket_timeout = self.connect_timeout
        params.stack_timeout = self.connect_timeout * 2
        params.blocked_connection_timeout = self.confirm_timeout
        params.heartbeat = self.heartbeat
        params.connection_attempts = 1
        try:
            self._connection = pika.BlockingConnection(params)
        except PIKA_ERRORS as exc:
            self._connection = None
            raise self._unavailable(exc) from exc
        self._checked.clear()
        self._open_channel()

    def _open_channel(self) -> None:
        """Open a channel in confirm mode with our own ack/nack and return callbacks."""
        assert self._connection is not None
        try:
            with answered_within(self._connection, self.connect_timeout):
                channel = self._connection.channel()
                # BlockingChannel's own confirm mode waits for each confirm; we enable confirms on
                # the underlying channel instead and track delivery tags, so a batch is pipelined.
                impl = pika_compat.channel_impl(channel)
                selected: list[bool] = []
                impl.confirm_delivery(
                    ack_nack_callback=self._on_confirm, callback=lambda _frame: selected.append(True)
                )
                impl.add_on_return_callback(self._on_return)
                pika_compat.flush_until(channel, lambda: bool(selected))
        except PIKA_ERRORS as exc:
            self._drop()
            raise self._unavailable(exc) from exc
        self._channel = channel
        self._next_tag = 0

    def _drop(self, *, broken: bool = True) -> None:
        """Forget the connection, closing it if it is still open.

        A ``broken`` connection (an error or timeout just happened on it) has its socket shut
        first, so closing it never waits for a broker that no longer answers; a clean close
        gets ``connect_timeout`` for the broker's Close-Ok before the socket is shut.
        """
        conn, self._connection, self._channel = self._connection, None, None
        self._checked.clear()
        if conn is not None and conn.is_open:
            close_within(conn, 0.0 if broken else self.connect_timeout)

    def _ensure_open(self) -> None:
        """Reconnect if needed; an idle connection the broker dropped is noticed here, before a send."""
        if self._connection is not None and self._connection.is_open:
            try:
                self._connection.process_data_events(time_limit=0)  # heartbeats, a pending close
            except PIKA_ERRORS:
                logger.info("AMQP connection was lost while idle; reconnecting")
                self._drop()
        if self._connection is None or not self._connection.is_open:
            self._drop()
            self._connect()
        elif self._channel is None or not self._channel.is_open:
            self._open_channel()

    def close(self) -> None:
        """Close the connection (a later publish reconnects)."""
        self._drop(broken=False)

    def __enter__(self) -> AmqpPublisher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- broker callbacks (called by pika while we process events) ----------------

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        tag = method.delivery_tag
        if method.multiple:  # every tag up to this one; tags were added in ascending order
            tags = []
            for t in self._unconfirmed:
                if t > tag:
                    break
                tags.append(t)
        else:
            tags = [tag]
        target = self._nacked if isinstance(method, pika.spec.Basic.Nack) else self._acked
        for t in tags:
            message_id = self._unconfirmed.pop(t, None)
            if message_id is not None:
                target.add(message_id)

    def _on_return(self, _channel: Any, method: Any, properties: Any, _body: bytes) -> None:
        message_id = properties.message_id or ""
        self._returned[message_id] = f"{method.reply_code} {method.reply_text}"

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
        try:
            with answered_within(self._connection, self.confirm_timeout):
                if declare_passive(queue) or queue in self.passive_queues:
                    self._channel.queue_declare(queue=queue, passive=True)
                else:
                    self._channel.queue_declare(queue=queue, durable=True)
        except pika.exceptions.ChannelClosedByBroker as exc:
            self._channel = None
            try:
                self._open_channel()
            except BrokerConnectionError:
                logger.warning("could not reopen the AMQP channel after declaring %s", queue)
            if exc.reply_code == 404:
                raise MissingQueueError(queue, exc.reply_text) from exc
            raise PublishError(f"cannot declare queue {queue!r}: {exc.reply_code} {exc.reply_text}") from exc
        except PIKA_ERRORS as exc:
            self._drop()
            raise self._unavailable(exc) from exc
        self._checked.add(queue)

    def declare_durable(self, queues: Iterable[str]) -> list[str]:
        """Declare ``queues`` durable (``kickoff amqp setup``); returns the names declared."""
        self._ensure_open()
        done = []
        for queue in queues:
            try:
                with answered_within(self._connection, self.confirm_timeout):
                    self._channel.queue_declare(queue=queue, durable=True)
            except PIKA_ERRORS as exc:
                self._drop()
                raise self._unavailable(exc) from exc
            self._checked.add(queue)
            done.append(queue)
        return done

    def delete_queue(self, queue: str) -> None:
        """Delete ``queue`` (tests and operator clean-up)."""
        self._ensure_open()
        try:
            with answered_within(self._connection, self.confirm_timeout):
                self._channel.queue_delete(queue=queue)
        except PIKA_ERRORS as exc:
            self._drop()
            raise self._unavailable(exc) from exc
        self._checked.discard(queue)

    # -- publishing -------------------------------------------------------------------

    def publish(self, message: OutgoingMessage) -> None:
        """Publish one message and wait for its confirm; raise the PublishError if not confirmed."""
        outcome = self.publish_many([message])[0]
        if outcome.error is not None:
            raise outcome.error

    def publish_many(self, messages: Sequence[OutgoingMessage]) -> list[PublishOutcome]:
        """Publish ``messages`` back to back, then wait for all confirms; one outcome per message.

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
            except BrokerConnectionError as exc:  # the link is gone: nothing of the batch was sent
                return [PublishOutcome(m, errors.get(m.message_id, exc)) for m in messages]
            except PublishError as exc:
                for m in messages:
                    if m.queue == queue:
                        errors[m.message_id] = exc
                continue
            sendable.extend(m for m in messages if m.queue == queue)
        sent: set[str] = set()
        if sendable:
            self._acked.clear()
            self._nacked.clear()
            self._returned.clear()
            self._unconfirmed.clear()
            self._unencodable.clear()
            try:
                self._send(sendable, sent)
                self._await_confirms()
            except (*PIKA_ERRORS, _ConfirmTimeout) as exc:
                self._drop()
                for m in sendable:
                    if m.message_id in self._unencodable:
                        continue
                    if m.message_id in self._acked and m.message_id not in self._returned:
                        continue
                    if m.message_id in sent:
                        errors[m.message_id] = PublishUncertainError(
                            f"message {m.message_id} to {m.queue} sent but not confirmed: {_reason(exc)}"
                        )
                    else:
                        errors[m.message_id] = self._unavailable(exc)
                self._unconfirmed.clear()
            else:
                missing = self._missing_after_return(
                    {m.queue for m in sendable if m.message_id in self._returned}
                )
                for m in sendable:
                    if m.message_id in self._returned:
                        reply = self._returned[m.message_id]
                        if m.queue in missing:
                            errors[m.message_id] = missing[m.queue]
                            continue
                        errors[m.message_id] = UnroutableMessageError(
                            f"message {m.message_id} to {m.queue} was returned: {reply}"
                        )
                    elif m.message_id in self._nacked:
                        errors[m.message_id] = PublishNackedError(
                            f"message {m.message_id} to {m.queue} was nacked by the broker"
                        )
        errors.update(self._unencodable)
        return [PublishOutcome(m, errors.get(m.message_id)) for m in messages]

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

    def _send(self, messages: Sequence[OutgoingMessage], sent: set[str]) -> None:
        """Write the batch's frames to the connection's buffer as one piece (sent by _await_confirms).

        What ``basic_publish`` would write, marshalled here: the Basic.Publish method frame is
        the same for every message to a queue and is marshalled once; the body frames are
        packed directly. Saves pika's per-frame work, which dominates a large batch. A message
        AMQP cannot encode is left out and recorded in ``_unencodable``; the others still go.
        """
        impl = pika_compat.channel_impl(self._channel)
        if not impl.is_open:
            raise pika.exceptions.ChannelWrongStateError("Channel is closed.")
        number = impl.channel_number
        body_max = pika_compat.body_max_length(self._connection)
        timestamp = int(time.time())
        methods: dict[str, bytes] = {}
        frames: list[bytes] = []
        ids: list[str] = []
        for m in messages:
            try:
                body = m.encoded()
                method = methods.get(m.queue)
                if method is None:
                    publish = pika.spec.Basic.Publish(exchange="", routing_key=m.queue, mandatory=True)
                    method = methods[m.queue] = pika.frame.Method(number, publish).marshal()
                props = pika.BasicProperties(
                    content_type=CONTENT_TYPE,
                    delivery_mode=PERSISTENT,
                    message_id=m.message_id,
                    headers=dict(m.headers) or None,
                    timestamp=timestamp,
                )
                header = pika.frame.Header(number, len(body), props).marshal()
            except _ENCODING_ERRORS as exc:
                reason = f"{type(exc).__name__}: {_reason(exc)}"
                self._unencodable[m.message_id] = UnencodableMessageError(
                    f"message {m.message_id} to {m.queue} cannot be encoded: {reason}"
                )
                continue
            frames.append(method)
            frames.append(header)
            for start in range(0, len(body), body_max):
                chunk = body[start : start + body_max]
                frames.append(_BODY_FRAME.pack(pika.spec.FRAME_BODY, number, len(chunk)) + chunk + _FRAME_END)
            ids.append(m.message_id)
        if frames:
            pika_compat.write_frames(self._connection, b"".join(frames))
        for message_id in ids:
            self._next_tag += 1
            self._unconfirmed[self._next_tag] = message_id
            sent.add(message_id)

    def _await_confirms(self) -> None:
        """Process I/O until every tag of the batch is confirmed; _ConfirmTimeout past the deadline.

        The deadline is checked by the wait's own stop condition. BlockingConnection.call_later
        callbacks only run from process_data_events, never inside flush_until, so a ticker on
        the I/O loop itself wakes the poll at least every CONFIRM_POLL_SECONDS to re-check it.
        """
        # pika queues every frame (method, header, body) as its own buffer and sends them one by
        # one; joined, the batch leaves in a few sends, not 3 per message.
        pika_compat.coalesce_output(self._connection)
        connection = self._connection
        assert connection is not None
        deadline = time.monotonic() + self.confirm_timeout
        timer: list[object] = []

        def expired() -> bool:
            return time.monotonic() >= deadline

        def tick() -> None:
            timer[:] = [pika_compat.call_later(connection, CONFIRM_POLL_SECONDS, tick)]

        tick()
        try:
            pika_compat.flush_until(self._channel, lambda: not self._unconfirmed or expired())
        finally:
            if self._connection is not None and self._connection.is_open and timer:
                pika_compat.remove_timeout(connection, timer[0])
        if self._unconfirmed:
            raise _ConfirmTimeout(f"no confirm within {self.confirm_timeout:g}s")


class _ConfirmTimeout(Exception):
    """Internal: the broker did not confirm a batch in time (becomes PublishUncertainError)."""


def _shut_socket(conn: pika.BlockingConnection) -> None:
    """Shut the connection's socket: pika's loop then sees the stream end and stops waiting."""
    sock = pika_compat.socket_of(conn)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def answered_within(conn: pika.BlockingConnection | None, seconds: float) -> Iterator[None]:
    """Give the broker round trips of the block (a channel open, a declare) ``seconds`` to answer.

    BlockingChannel's RPCs wait for their reply without a deadline; on a black-holed link that
    is until the heartbeat timeout (twice AMQP heartbeat). A ticker on the connection's own I/O
    loop shuts the socket once the deadline passes, so the wait ends as a lost stream (a pika
    error the caller turns into BrokerConnectionError).
    """
    if conn is None:
        yield
        return
    deadline = time.monotonic() + seconds
    timer: list[object] = []

    def tick() -> None:
        if time.monotonic() >= deadline:
            timer.clear()
            _shut_socket(conn)
        else:
            timer[:] = [pika_compat.call_later(conn, CONFIRM_POLL_SECONDS, tick)]

    tick()
    try:
        yield
    finally:
        if timer and conn.is_open:
            with contextlib.suppress(Exception):
                pika_compat.remove_timeout(conn, timer[0])


def close_within(conn: pika.BlockingConnection, seconds: float) -> None:
    """Close ``conn``, waiting at most ``seconds`` for the broker's answer.

    BlockingConnection.close waits for Close-Ok without a deadline; on a black-holed link that
    is until the heartbeat timeout. A ticker on the connection's own I/O loop shuts the socket
    once the deadline passes (at once for 0), which ends the wait as a lost stream.
    """
    deadline = time.monotonic() + seconds

    def tick() -> None:
        if time.monotonic() >= deadline:
            _shut_socket(conn)
        else:
            pika_compat.call_later(conn, CONFIRM_POLL_SECONDS, tick)

    if seconds <= 0:
        _shut_socket(conn)
    else:
        pika_compat.call_later(conn, CONFIRM_POLL_SECONDS, tick)
    try:
        conn.close()
    except Exception:  # a broken connection may fail to close; it is gone anyway
        logger.debug("ignored error while closing an AMQP connection", exc_info=True)


def read_messages(*, url: str, queue: str, limit: int = 10_000) -> list[tuple[dict[str, Any], Any]]:
    """Drain up to ``limit`` messages from ``queue`` (tests, contract checks): (body, properties) pairs."""
    params = pika.URLParameters(url)
    try:
        conn = pika.BlockingConnection(params)
    except PIKA_ERRORS as exc:
        raise BrokerConnectionError(
            service="RabbitMQ", setting="AMQP_URL", address=mask_url(url), reason=_reason(exc)
        ) from exc
    out: list[tuple[dict[str, Any], Any]] = []
    try:
        channel = conn.channel()
        while len(out) < limit:
            method, props, body = channel.basic_get(queue=queue, auto_ack=True)
            if method is None:
                break
            out.append((json.loads(body), props))
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code == 404:
            raise MissingQueueError(queue) from exc
        raise PublishError(f"cannot read {queue!r}: {exc}") from exc
    finally:
        if conn.is_open:
            conn.close()
    return out


def publisher_from_settings(settings: Any) -> AmqpPublisher:
    """An AmqpPublisher on AMQP_URL with the configured confirm and connect timeouts."""
    return AmqpPublisher(
        url=settings.amqp_url,
        confirm_timeout=settings.amqp_confirm_timeout_seconds,
        connect_timeout=settings.amqp_connect_timeout_seconds,
    )
