"""kickoff's AMQP transport: one RabbitMQ connection and channel on pika's public SelectConnection API.

pika's BlockingConnection waits for each publisher confirm in turn; kickoff pipelines a batch
instead, which needs the asynchronous API. ``AmqpLink`` drives a ``SelectConnection`` on its
own ``IOLoop`` synchronously, in the calling thread: each operation starts pika's asynchronous
call, then runs the loop until its callback came, the connection or the channel closed, or a
deadline passed (``ioloop.start()`` / ``ioloop.stop()``, ``ioloop.call_later``). Confirms
use ``Channel.confirm_delivery(ack_nack_callback)`` with ``Basic.Ack``/``Basic.Nack`` ``multiple``
handling; returns of mandatory messages ``Channel.add_on_return_callback``.

This is the only module that names pika's exceptions: every failure pika raises or reports is
translated here, once, into ``publisher.errors`` (BrokerConnectionError for a broker that cannot be
reached, refuses the login or was lost; MissingQueueError for a queue that is not declared;
PublishError for another refusal of the channel). Not thread-safe: one link per thread.

A connection that no longer answers (a black-holed link) never completes pika's close
handshake; the link then shuts its socket down, found through the file descriptor pika registers
on the loop (``IOLoop.add_handler``, a public method of the loop the link gives pika), so pika
sees the stream end and the close completes at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pika
import pika.exceptions
import pika.spec
from pika.adapters.select_connection import IOLoop, SelectConnection
from pika.adapters.utils.connection_workflow import AMQPConnectorException

from config.errors import ErrorKind, KickoffError
from config.settings import mask_url
from publisher.errors import BrokerConnectionError, MissingQueueError, PublishError, UnencodableMessageError

logger = logging.getLogger(__name__)

#: Every way pika reports a broker it cannot reach or talk to. A connect that times out during
#: the AMQP handshake (a black-holed link) raises AMQPConnectorStackTimeout, which is neither an
#: AMQPError nor an OSError.
PIKA_ERRORS: tuple[type[BaseException], ...] = (pika.exceptions.AMQPError, OSError, AMQPConnectorException)
#: What building a message's frames raises for a message AMQP cannot carry (pika's field and
#: string checks, struct's range); pika marshals every frame before it writes any.
_ENCODING_ERRORS: tuple[type[BaseException], ...] = (
    pika.exceptions.AMQPError,
    struct.error,
    TypeError,
    ValueError,
)

#: How long a close waits for the broker after the socket was shut (pika then sees the stream end).
_SHUT_CLOSE_SECONDS = 2.0


def reason_of(exc: BaseException) -> str:
    """The first line of an exception's text (its type's name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _LinkLost(KickoffError):
    """Internal: the connection failed or closed during an operation (becomes BrokerConnectionError)."""

    kind = ErrorKind.UNAVAILABLE

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause
        super().__init__(reason_of(cause))


class _ChannelClosed(KickoffError):
    """Internal: the broker closed the channel (a refused declare); reply code and text."""

    kind = ErrorKind.UNAVAILABLE

    def __init__(self, reply_code: int, reply_text: str) -> None:
        self.reply_code = reply_code
        self.reply_text = reply_text
        super().__init__(f"{reply_code} {reply_text}")


class _RecordingIOLoop(IOLoop):
    """pika's IOLoop, remembering the file descriptors pika watches (the connection's socket)."""

    def __init__(self) -> None:
        super().__init__()
        self.watched: set[int] = set()

    def add_handler(self, fd: int, handler: Callable[[int, int], None], events: int) -> None:
        self.watched.add(fd)
        super().add_handler(fd, handler, events)

    def remove_handler(self, fd: int) -> None:
        self.watched.discard(fd)
        super().remove_handler(fd)


@dataclass(frozen=True)
class Publication:
    """One message as the link sends it: queue (routing key on the default exchange), body, properties."""

    queue: str
    body: bytes
    message_id: str
    headers: dict[str, Any] | None = None
    content_type: str | None = "application/json"
    persistent: bool = True
    timestamp: int | None = None


@dataclass
class BatchResult:
    """What the broker answered for a batch: message ids acked, nacked, returned (with the reply),
    those never sent because AMQP cannot encode them, and whether confirms were still missing
    (``lost``: the connection failed or the deadline passed; its reason in ``lost_reason``)."""

    sent: set[str] = field(default_factory=set)
    acked: set[str] = field(default_factory=set)
    nacked: set[str] = field(default_factory=set)
    returned: dict[str, str] = field(default_factory=dict)
    unencodable: dict[str, PublishError] = field(default_factory=dict)
    lost: bool = False
    lost_reason: str = ""


@dataclass(kw_only=True, eq=False, repr=False)
class AmqpLink:
    """A lazily opened RabbitMQ connection with one channel (in confirm mode when ``confirms``).

    Errors name ``setting`` (AMQP_URL or BROKER_URL) and ``service``; ``close()`` when done.
    """

    url: str
    setting: str = "AMQP_URL"
    service: str = "RabbitMQ"
    confirms: bool = True
    connect_timeout: float = 5.0
    heartbeat: int = 30
    blocked_timeout: float | None = None
    #: Shared by links that publish side by side (the drain's workers): a batch's frames are
    #: written while holding it, and it is released before the batch's confirms are awaited, so
    #: one link writes while the others await confirms, mark and claim. Without it the drains fall
    #: into lockstep: all write at once, all wait at once, and the broker idles while they mark.
    send_turn: threading.Lock | None = None

    #: A batch being published hands its frames to the socket every this many messages (one turn of
    #: the loop), so the broker persists and confirms its start while the rest is encoded.
    FLUSH_EVERY = 100

    def __post_init__(self) -> None:
        self._loop: _RecordingIOLoop | None = None
        self._connection: SelectConnection | None = None
        self._channel: Any = None
        self._failure: BaseException | None = None  # why the connection closed
        self._channel_closed: BaseException | None = None  # why the channel closed
        self._done: Callable[[], bool] | None = None  # the condition the running loop waits for
        # confirms of the batch being sent: delivery tag -> message id, in ascending order
        self._unconfirmed: dict[int, str] = {}
        self._next_tag = 0
        self._batch: BatchResult | None = None
        self._on_message: Callable[[Any, Any, Any, bytes], None] | None = None

    # -- errors -----------------------------------------------------------------------

    def unavailable(self, exc: BaseException) -> BrokerConnectionError:
        """The error of a broker that cannot be reached or was lost, naming the setting."""
        cause = exc.cause if isinstance(exc, _LinkLost) else exc
        return BrokerConnectionError(
            service=self.service, setting=self.setting, address=mask_url(self.url), reason=reason_of(cause)
        )

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        """pika's failures inside an operation as BrokerConnectionError (the link is dropped)."""
        try:
            yield
        except (_LinkLost, *PIKA_ERRORS) as exc:
            self.abort()
            raise self.unavailable(exc) from exc

    # -- the loop -----------------------------------------------------------------------

    def _poke(self) -> None:
        """From a pika callback: stop the loop once what it waits for happened or the link failed."""
        if self._loop is None:
            return
        if (
            self._done is None
            or self._failure is not None
            or self._channel_closed is not None
            or self._done()
        ):
            self._loop.stop()

    def _run(self, done: Callable[[], bool], timeout: float) -> bool:
        """Run the loop until ``done()``, a closed connection or channel, or ``timeout`` seconds;
        whether ``done()`` holds. A closed connection raises _LinkLost, a closed channel
        _ChannelClosed."""
        loop = self._loop
        assert loop is not None
        if not done() and self._failure is None and self._channel_closed is None:
            self._done = done
            timer = loop.call_later(max(0.0, timeout), loop.stop)
            try:
                loop.start()
            finally:
                self._done = None
                loop.remove_timeout(timer)
        if self._failure is not None:
            raise _LinkLost(self._failure)
        closed = self._channel_closed
        if closed is not None:
            self._channel = None
            self._channel_closed = None
            code = getattr(closed, "reply_code", 0)
            text = getattr(closed, "reply_text", reason_of(closed))
            raise _ChannelClosed(code, text)
        return done()

    # -- connection and channel ---------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._connection is not None and self._connection.is_open and self._failure is None

    def open(self) -> None:
        """Open the connection and channel if needed; notice a connection lost while idle first.

        BrokerConnectionError when the broker cannot be reached.
        """
        if self._connection is not None and self._failure is None:
            try:
                self._run(lambda: False, 0)  # heartbeats, a close the broker sent meanwhile
            except _LinkLost:
                logger.info("AMQP connection was lost while idle; reconnecting")
            except _ChannelClosed:
                pass
        if self._connection is None or self._failure is not None or not self._connection.is_open:
            self.abort()
            self._connect()
        if self._channel is None or not self._channel.is_open:
            with self._translated():
                self._open_channel()

    def _connect(self) -> None:
        params = pika.URLParameters(self.url)
        params.socket_timeout = self.connect_timeout
        params.stack_timeout = self.connect_timeout * 2
        params.blocked_connection_timeout = self.blocked_timeout
        params.heartbeat = self.heartbeat
        params.connection_attempts = 1
        opened: list[bool] = []
        self._failure = None
        self._channel_closed = None
        self._loop = _RecordingIOLoop()

        def on_open(_connection: Any) -> None:
            opened.append(True)
            self._poke()

        def on_open_error(_connection: Any, exc: BaseException) -> None:
            self._failure = exc
            self._poke()

        def on_close(_connection: Any, exc: BaseException) -> None:
            self._failure = exc
            self._poke()

        try:
            self._connection = SelectConnection(
                params,
                on_open_callback=on_open,
                on_open_error_callback=on_open_error,
                on_close_callback=on_close,
                custom_ioloop=self._loop,
            )
            # pika's own stack timeout ends a stalled handshake; this deadline only backs it up
            if not self._run(lambda: bool(opened), params.stack_timeout + self.connect_timeout):
                raise _LinkLost(TimeoutError(f"no connection within {params.stack_timeout:g}s"))
        except (_LinkLost, _ChannelClosed, *PIKA_ERRORS) as exc:
            self.abort()
            raise self.unavailable(exc) from exc
        with self._translated():
            self._open_channel()

    def _open_channel(self) -> None:
        assert self._connection is not None
        ready: list[Any] = []

        def on_channel_open(channel: Any) -> None:
            ready.append(channel)
            self._poke()

        def on_channel_close(closed: Any, reason: BaseException) -> None:
            if closed is self._channel or self._channel is None:
                self._channel_closed = reason
            self._poke()

        self._channel = None
        self._connection.channel(on_open_callback=on_channel_open)
        if not self._run(lambda: bool(ready), self.connect_timeout):
            raise _LinkLost(TimeoutError("no channel within the connect timeout"))
        channel = ready[0]
        channel.add_on_close_callback(on_channel_close)
        if self.confirms:
            selected: list[bool] = []

            def on_selected(_frame: Any) -> None:
                selected.append(True)
                self._poke()

            # looked up per call, so a test can replace the handler on a link that is open
            channel.confirm_delivery(
                ack_nack_callback=lambda frame: self._on_confirm(frame), callback=on_selected
            )
            channel.add_on_return_callback(lambda *returned: self._on_return(*returned))
            if not self._run(lambda: bool(selected), self.connect_timeout):
                raise _LinkLost(TimeoutError("no Confirm.SelectOk within the connect timeout"))
        self._channel = channel
        self._next_tag = 0
        self._unconfirmed.clear()

    def close(self, *, timeout: float | None = None) -> None:
        """Close the connection, waiting at most ``timeout`` (default ``connect_timeout``) seconds
        for the broker's Close-Ok; past it (at once for 0) the socket is shut."""
        connection, loop = self._connection, self._loop
        self._connection, self._channel = None, None
        if connection is None or loop is None:
            return
        wait = self.connect_timeout if timeout is None else timeout
        try:
            if wait > 0 and connection.is_open and self._failure is None:
                connection.close()
                self._done = None
                self._run_until_closed(connection, loop, wait)
            if not connection.is_closed:
                self._shut(loop)
                if not connection.is_closing and not connection.is_closed:
                    with contextlib.suppress(*PIKA_ERRORS):
                        connection.close()
                self._run_until_closed(connection, loop, _SHUT_CLOSE_SECONDS)
        except Exception:  # a broken connection may fail to close; it is gone anyway
            logger.debug("ignored error while closing an AMQP connection", exc_info=True)
        finally:
            self._loop = None
            self._failure = None
            self._channel_closed = None
            with contextlib.suppress(Exception):
                loop.close()

    def abort(self) -> None:
        """Drop the connection at once (after a failure): the socket is shut, nothing awaited."""
        self.close(timeout=0)

    def _run_until_closed(self, connection: SelectConnection, loop: IOLoop, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not connection.is_closed and time.monotonic() < deadline:
            self._failure = None  # the close reports itself through on_close: keep waiting for it
            self._channel_closed = None
            self._done = lambda: connection.is_closed
            timer = loop.call_later(max(0.0, deadline - time.monotonic()), loop.stop)
            try:
                loop.start()
            finally:
                self._done = None
                loop.remove_timeout(timer)

    @staticmethod
    def _tcp_sockets(loop: _RecordingIOLoop) -> Iterator[socket.socket]:
        """The TCP sockets pika watches on ``loop``, each as a duplicate of its descriptor (closed
        after use: a duplicate left open would keep the connection open)."""
        for fd in list(loop.watched):
            with contextlib.suppress(OSError), socket.socket(fileno=os.dup(fd)) as sock:
                if sock.family in (socket.AF_INET, socket.AF_INET6):
                    yield sock

    @classmethod
    def _shut(cls, loop: _RecordingIOLoop) -> None:
        """Shut the connection's socket down: pika sees the stream end and stops waiting."""
        for sock in cls._tcp_sockets(loop):
            sock.shutdown(socket.SHUT_RDWR)

    def _cork(self, on: bool) -> None:
        """Linux's TCP_CORK on the connection's socket: while on, the kernel joins the frames pika
        sends one ``send`` each into full segments (a batch is three frames per message); off
        sends what is left at once. Nothing where the option does not exist."""
        option = getattr(socket, "TCP_CORK", None)
        if option is None or self._loop is None:
            return
        for sock in self._tcp_sockets(self._loop):
            sock.setsockopt(socket.IPPROTO_TCP, option, 1 if on else 0)

    # -- queues ---------------------------------------------------------------------------

    def _call(self, start: Callable[[Callable[[Any], None]], None], what: str) -> Any:
        """Start an asynchronous channel call with a callback, run the loop until it answers."""
        answer: list[Any] = []

        def on_answer(frame: Any) -> None:
            answer.append(frame)
            self._poke()

        start(on_answer)
        if not self._run(lambda: bool(answer), self.connect_timeout * 2):
            raise _LinkLost(TimeoutError(f"no answer to {what}"))
        return answer[0]

    def declare(
        self, queue: str, *, passive: bool, durable: bool = True, arguments: dict | None = None
    ) -> int:
        """Declare ``queue`` (or check it, ``passive``); its ready message count.

        MissingQueueError for a passive declare of a queue that is not there, PublishError for
        another refusal (the channel is reopened either way), BrokerConnectionError when the
        broker cannot be reached.
        """
        self.open()
        try:
            with self._translated():
                frame = self._call(
                    lambda cb: self._channel.queue_declare(
                        queue=queue, passive=passive, durable=durable, arguments=arguments, callback=cb
                    ),
                    f"declaring {queue}",
                )
        except _ChannelClosed as exc:
            raise self._queue_refused(
                exc, queue, f"cannot declare queue {queue!r}: {exc.reply_code} {exc.reply_text}"
            ) from exc
        return int(frame.method.message_count)

    def delete(self, queue: str) -> None:
        """Delete ``queue`` (tests and operator clean-up)."""
        self.open()
        try:
            with self._translated():
                self._call(
                    lambda cb: self._channel.queue_delete(queue=queue, callback=cb), f"deleting {queue}"
                )
        except _ChannelClosed as exc:
            self._reopen_channel(queue)
            raise PublishError(f"cannot delete queue {queue!r}: {exc}") from exc

    def _queue_refused(self, exc: _ChannelClosed, queue: str, message: str) -> PublishError:
        """The error of an operation on ``queue`` the broker closed the channel over (the channel is
        reopened first): MissingQueueError for a queue that does not exist, else PublishError(``message``)."""
        self._reopen_channel(queue)
        if exc.reply_code == 404:
            return MissingQueueError(queue, exc.reply_text)
        return PublishError(message)

    def _reopen_channel(self, queue: str) -> None:
        try:
            with self._translated():
                self._open_channel()
        except BrokerConnectionError:
            logger.warning("could not reopen the AMQP channel after declaring %s", queue)

    # -- publishing -------------------------------------------------------------------------

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
        batch = self._batch
        target = (
            None
            if batch is None
            else batch.nacked
            if isinstance(method, pika.spec.Basic.Nack)
            else batch.acked
        )
        for t in tags:
            message_id = self._unconfirmed.pop(t, None)
            if message_id is not None and target is not None:
                target.add(message_id)
        self._poke()

    def _on_return(self, _channel: Any, method: Any, properties: Any, _body: bytes) -> None:
        if self._batch is not None:
            self._batch.returned[properties.message_id or ""] = f"{method.reply_code} {method.reply_text}"

    def publish_batch(self, messages: Sequence[Publication], *, confirm_timeout: float) -> BatchResult:
        """Publish ``messages`` back to back (mandatory, default exchange), then await every confirm.

        The connection must be open (``open()``). A message AMQP cannot encode is not sent (in
        ``unencodable``); a connection lost or a deadline passed before every confirm sets
        ``lost`` (the link is dropped): which messages were sent and which confirmed says what is
        certain. Not raising lets the caller decide per message.
        """
        result = self._batch = BatchResult()
        self._unconfirmed.clear()
        try:
            channel = self._channel
            if channel is None or not channel.is_open:
                raise _LinkLost(pika.exceptions.ChannelWrongStateError("Channel is closed."))
            turn = self.send_turn if len(messages) > 1 else None
            if turn is not None:
                turn.acquire()
            try:
                self._write_batch(channel, messages, result)
            finally:
                if turn is not None:
                    turn.release()
            if not self._run(lambda: not self._unconfirmed, confirm_timeout):
                result.lost, result.lost_reason = True, f"no confirm within {confirm_timeout:g}s"
        except (_LinkLost, _ChannelClosed, *PIKA_ERRORS) as exc:
            result.lost, result.lost_reason = (
                True,
                reason_of(exc.cause if isinstance(exc, _LinkLost) else exc),
            )
        finally:
            self._batch = None
        if result.lost:
            self._unconfirmed.clear()
            self.abort()
        return result

    def _write_batch(self, channel: Any, messages: Sequence[Publication], result: BatchResult) -> None:
        """Publish ``messages`` (corked) and hand their frames to the socket; confirms are not awaited."""
        if len(messages) > 1:
            self._cork(True)
        try:
            for m in messages:
                properties = pika.BasicProperties(
                    content_type=m.content_type,
                    delivery_mode=2 if m.persistent else None,
                    message_id=m.message_id,
                    headers=m.headers or None,
                    timestamp=m.timestamp,
                )
                try:
                    channel.basic_publish("", m.queue, m.body, properties, mandatory=True)
                except (pika.exceptions.ChannelWrongStateError, pika.exceptions.ConnectionWrongStateError):
                    raise
                except _ENCODING_ERRORS as exc:
                    result.unencodable[m.message_id] = UnencodableMessageError(
                        f"message {m.message_id} to {m.queue} cannot be encoded: "
                        f"{type(exc).__name__}: {reason_of(exc)}"
                    )
                    continue
                self._next_tag += 1
                self._unconfirmed[self._next_tag] = m.message_id
                result.sent.add(m.message_id)
                if len(result.sent) % self.FLUSH_EVERY == 0:
                    self._run(lambda: False, 0)  # one turn of the loop: what is buffered goes out
        finally:
            # pika writes what is still buffered on the loop's next turn; the timer after it uncorks
            assert self._loop is not None
            self._loop.call_later(0, lambda: self._cork(False))
        self._run(lambda: False, 0)

    # -- reading and consuming ----------------------------------------------------------------

    def get(self, queue: str) -> tuple[Any, bytes] | None:
        """One message of ``queue`` taken with auto-ack: (properties, body), None when empty."""
        self.open()
        got: list[tuple[Any, bytes] | None] = []

        def on_message(_channel: Any, _method: Any, properties: Any, body: bytes) -> None:
            got.append((properties, body))
            self._poke()

        try:
            with self._translated():
                self._channel.basic_get(queue=queue, callback=on_message, auto_ack=True)
                # an empty queue answers Basic.GetEmpty, which pika gives to no callback of
                # basic_get: a passive declare after it answers once the get was answered
                self._call(
                    lambda cb: self._channel.queue_declare(queue=queue, passive=True, callback=cb),
                    f"reading {queue}",
                )
        except _ChannelClosed as exc:
            raise self._queue_refused(exc, queue, f"cannot read {queue!r}: {exc}") from exc
        return got[0] if got else None

    def consume(
        self, queue: str, *, prefetch: int, on_message: Callable[[Any, Any, Any, bytes], None]
    ) -> None:
        """Check ``queue`` (passive) and start consuming it with manual acks and ``prefetch``;
        ``on_message(channel, method, properties, body)`` runs inside ``poll``."""
        self.declare(queue, passive=True)
        try:
            with self._translated():
                self._call(
                    lambda cb: self._channel.basic_qos(prefetch_count=prefetch, callback=cb), "basic.qos"
                )
                self._channel.basic_consume(queue=queue, on_message_callback=on_message, auto_ack=False)
        except _ChannelClosed as exc:
            self.abort()
            raise self.unavailable(exc) from exc

    def poll(self, timeout: float) -> None:
        """Run the connection for ``timeout`` seconds (deliveries, acks, heartbeats)."""
        if self._connection is None:
            raise self.unavailable(ConnectionError("not connected"))
        try:
            with self._translated():
                self._run(lambda: False, timeout)
                # the loop may stop on its deadline right after a delivery callback: one more
                # turn sends what the callback queued (its ack) before the poll returns
                self._run(lambda: False, 0)
        except _ChannelClosed as exc:
            self.abort()
            raise self.unavailable(exc) from exc

    def ack(self, delivery_tag: int) -> None:
        """Ack a delivery: sent before the running ``poll`` returns, or at once outside one."""
        self._settle(lambda: self._channel.basic_ack(delivery_tag=delivery_tag))

    def nack(self, delivery_tag: int) -> None:
        """Hand a delivery back to the queue (sent like ``ack``)."""
        self._settle(lambda: self._channel.basic_nack(delivery_tag=delivery_tag, requeue=True))

    def _settle(self, send: Callable[[], None]) -> None:
        # called from a delivery callback, inside the running loop: the link is not dropped here
        # (that runs the loop); the failure is kept, so the running ``poll`` and ``is_open`` see it
        try:
            if self._channel is None:
                raise pika.exceptions.ChannelWrongStateError("Channel is closed.")
            send()
            if self._done is None and self._loop is not None:  # outside a running loop: send now
                with self._translated():
                    self._run(lambda: False, 0)
        except PIKA_ERRORS as exc:
            self._failure = self._failure or exc
            raise self.unavailable(exc) from exc


@contextlib.contextmanager
def amqp_errors(*, url: str, setting: str, service: str) -> Iterator[None]:
    """pika's errors raised by a library that uses pika itself (Dramatiq's RabbitmqBroker) as
    BrokerConnectionError naming ``setting``: the one place such errors are caught."""
    try:
        yield
    except PIKA_ERRORS as exc:
        raise BrokerConnectionError(
            service=service, setting=setting, address=mask_url(url), reason=reason_of(exc)
        ) from exc
