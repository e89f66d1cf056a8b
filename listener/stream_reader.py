"""A few threads per process read every open push stream (issue 34): each waits on its streams'
sockets at once (``selectors``) and handles every message of a read on its own thread, where the
layers' state stays warm, instead of one thread per stream woken for each message.

A run still owns its stream: its thread connects (``FeedConnection.open``), then ``follow`` hands the
open connection to a reader and sleeps until the stream ends, and takes up the reconnects, backoffs,
resumes and exits as before (listener.match_listener). What ends a stream reaches the run's thread:
a drop as StreamConnectionError (the same reasons as a thread's read: "stream dropped: ...",
"stream ended by the server", "stream silent for ..."), and whatever the run's handling raised.

Only a stream a reader can read is handed over (``FeedConnection.take_socket``): one opened through
a ``reader_session`` (no body byte read ahead with the headers), newline-delimited JSON (the
provider's framing) over plain HTTP, chunked or ended by the close, not compressed. A
``text/event-stream`` (kickoff's SSE framing, parsed by sseclient-py), a TLS connection, a
compressed or sized body is read by its run's thread as before.

A message's handling runs on the reader's thread, so it must not wait long: a run's backpressure (its
in-flight bound) or a backfill's merge holds the reader's other streams for that while (their bytes
wait in their sockets, which the silence watch counts as not silent: listener.stream
``SilenceWatch``); the status reload takes a database slot only when one is free.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from listener.errors import StreamConnectionError
from listener.stream import OVERSIZE, SILENCE_WATCH, FeedConnection, LineSplitter, note_feed_read

logger = logging.getLogger(__name__)

#: Bytes one read of a socket asks for (as a stream's own thread does: listener.stream ``_CHUNK``).
_READ_BYTES = 262144
#: A chunk-size line longer than this is no chunked body.
_MAX_SIZE_LINE = 1024
#: Why a malformed or cut chunked body ended (what requests names it on a stream's own thread).
_BAD_CHUNKS = "stream dropped: ChunkedEncodingError"
#: The shortest time between two passes of a reader over its readable sockets: a message waits at most
#: this long before it is read, and a reader wakes at most 1 / PASS_SECONDS times a second.
PASS_SECONDS = 0.05


class ChunkedBody:
    """Decodes an HTTP/1.1 chunked body fed as it arrives (RFC 9112 7.1); ``ended`` once its last
    chunk and trailers came. A malformed body raises ValueError."""

    def __init__(self) -> None:
        self._rest = b""  # an incomplete size line or CRLF, waiting for the next bytes
        self._left = 0  # data bytes of the current chunk still to come
        self._crlf = False  # the current chunk's data ended: its CRLF comes next
        self._trailers = False  # the last chunk came: trailer lines up to an empty one
        self.ended = False

    def feed(self, data: bytes) -> list[bytes]:
        """The body's bytes in ``data`` (pieces, in order)."""
        if self._rest:
            data, self._rest = self._rest + data, b""
        out: list[bytes] = []
        i, n = 0, len(data)
        while i < n and not self.ended:
            if self._left:
                take = min(self._left, n - i)
                out.append(data[i : i + take] if take < n or i else data)
                i += take
                self._left -= take
                self._crlf = not self._left
                continue
            if self._crlf:
                if n - i < 2:
                    break
                if data[i : i + 2] != b"\r\n":
                    raise ValueError("a chunk's data is not followed by CRLF")
                i += 2
                self._crlf = False
                continue
            end = data.find(b"\r\n", i)
            if end < 0:
                if n - i > _MAX_SIZE_LINE:
                    raise ValueError("a chunk size line is too long")
                break
            line = data[i:end]
            i = end + 2
            if self._trailers:
                self.ended = not line
                continue
            size_text = line.split(b";", 1)[0].strip()
            if not size_text.isalnum():  # int() would take a sign, spaces or underscores
                raise ValueError(f"bad chunk size {size_text[:20]!r}")
            size = int(size_text, 16)  # ValueError for a letter past f
            self._trailers = size == 0
            self._left = size
        if i < n and not self.ended:
            self._rest = data[i:]
        return out


@dataclass(eq=False)
class SharedStream:
    """One open stream handed to a reader: what the reader needs, and how the stream ended."""

    conn: FeedConnection
    sock: socket.socket
    on_message: Callable[[bytes | object], None]
    should_stop: Callable[[], bool]
    body: ChunkedBody | None  # None: the body is the connection's bytes up to its close
    reader: StreamReader | None = None
    lines: LineSplitter | None = None
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None  # what ended it (None: a stop the run asked for)


class StreamReader:
    """One reading thread: its streams' sockets in one selector, each read's messages handled here."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._commands: deque[tuple[str, SharedStream]] = deque()
        self.streams = 0  # streams registered (this thread's)
        self._pass_at = float("-inf")
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def add(self, stream: SharedStream) -> None:
        self._command("add", stream)

    def end_soon(self, stream: SharedStream) -> None:
        """End ``stream`` from any thread (a stop, the silence watch): it is closed while reading."""
        self._command("end", stream)

    def _command(self, what: str, stream: SharedStream) -> None:
        self._commands.append((what, stream))
        with contextlib.suppress(BlockingIOError, InterruptedError):
            self._wake_w.send(b"\0")

    def _run(self) -> None:
        while True:
            # A pass at most every PASS_SECONDS: the sockets that became readable meanwhile are read
            # in one wake-up (a thousand quiet streams make one message each, spread over the second).
            rest = self._pass_at + PASS_SECONDS - time.monotonic()
            if rest > 0:
                time.sleep(rest)
            self._pass_at = time.monotonic()
            try:
                ready = self._selector.select(timeout=5.0)
            except Exception:  # pragma: no cover - the selector itself failing is no stream's fault
                logger.exception("stream reader %s: select failed", self.name)
                continue
            for key, _ in ready:
                stream = key.data
                try:
                    if stream is None:
                        self._take_commands()
                    elif not stream.done.is_set():
                        self._read(stream)
                except Exception as exc:  # pragma: no cover - the reader outlives any one stream
                    logger.exception("stream reader %s failed on a stream", self.name)
                    if stream is not None and not stream.done.is_set():
                        self._end(stream, StreamConnectionError(f"stream reader failed: {exc!r}"))

    def _take_commands(self) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while self._wake_r.recv(4096):
                pass
        while self._commands:
            what, stream = self._commands.popleft()
            if stream.done.is_set():
                continue
            if what == "end":
                self._drop(stream, "stream closed while reading")
                continue
            try:
                self._selector.register(stream.sock, selectors.EVENT_READ, stream)
            except (OSError, ValueError, KeyError) as exc:  # closed meanwhile
                self._drop(stream, f"stream closed while connecting: {type(exc).__name__}")
                continue
            self.streams += 1

    def _read(self, stream: SharedStream) -> None:
        try:
            data = stream.sock.recv(_READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._drop(stream, f"stream dropped: {type(exc).__name__}")
            return
        if not data:
            # a chunked body cut before its last chunk is a drop, as urllib3 reports it to a thread
            self._drop(stream, "stream ended by the server" if stream.body is None else _BAD_CHUNKS)
            return
        self._received(stream, data)

    def _received(self, stream: SharedStream, data: bytes) -> None:
        """Decode ``data`` and handle the messages it completes, then hand the read over (a run's
        ``before_read``: its messages go to the event log as one batch)."""
        note_feed_read(stream.conn)
        try:
            pieces = [data] if stream.body is None else stream.body.feed(data)
        except ValueError:
            self._drop(stream, _BAD_CHUNKS)
            return
        assert stream.lines is not None
        on_message, should_stop = stream.on_message, stream.should_stop
        try:
            for piece in pieces:
                for line in stream.lines.feed(piece):
                    if line is OVERSIZE or line.strip():  # type: ignore[union-attr]
                        on_message(line)
                        if should_stop():
                            self._end(stream, None)
                            return
            before_read = stream.conn.config.before_read
            if before_read is not None:
                before_read()
        except BaseException as exc:  # the run's own error: its thread raises it
            self._end(stream, exc)
            return
        if stream.body is not None and stream.body.ended:
            self._drop(stream, "stream ended by the server")

    def _drop(self, stream: SharedStream, why: str) -> None:
        self._end(stream, StreamConnectionError(stream.conn.ended_why(why)))

    def _end(self, stream: SharedStream, error: BaseException | None) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(stream.sock)
            self.streams -= 1
        stream.sock.close()  # the reader's own descriptor (the run closes the response's)
        SILENCE_WATCH.unwatch(stream.conn)
        stream.error = error
        stream.done.set()


def _end_soon(stream: SharedStream) -> bool:
    """A close of ``stream``'s connection (listener.stream ``FeedConnection.close``): its reader ends it
    (True), unless it ended already (False)."""
    if stream.done.is_set():
        return False
    assert stream.reader is not None
    stream.reader.end_soon(stream)
    return True


class StreamReaders:
    """The process's reading threads (started with the first stream handed over)."""

    #: How often a run's thread, waiting for its stream's end, checks its reader is still alive (a net:
    #: a reader's loop does not end; each check wakes every run's thread, 10,000 of them in a big worker).
    CHECK_SECONDS = 60.0

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._readers: list[StreamReader] = []
        self._next = 0  # the streams go round the readers

    def follow(
        self,
        conn: FeedConnection,
        on_message: Callable[[bytes | object], None],
        *,
        should_stop: Callable[[], bool],
        threads: int,
    ) -> bool:
        """Read ``conn`` (open) on a reader thread, ``on_message`` for each message there, until the
        stream ends (raises StreamConnectionError, or what ``on_message`` raised) or ``should_stop``
        says so after a message (returns True). False, at once: ``conn`` cannot be read by a reader
        (listener.stream ``FeedConnection.take_socket``); its caller reads it itself."""
        taken = conn.take_socket()
        if taken is None:
            return False
        sock, chunked = taken
        stream = SharedStream(
            conn=conn,
            sock=sock,
            on_message=on_message,
            should_stop=should_stop,
            body=ChunkedBody() if chunked else None,
            lines=LineSplitter(conn.config.max_line_bytes),
        )
        reader = stream.reader = self._reader_for(threads)
        conn.close_by_reader = functools.partial(_end_soon, stream)
        if conn.closed:  # a close before ``close_by_reader`` was set closed it the usual way
            sock.close()
            stream.done.set()
            raise StreamConnectionError(conn.ended_why("stream closed while connecting"))
        SILENCE_WATCH.watch(conn)
        reader.add(stream)
        while not stream.done.wait(self.CHECK_SECONDS):
            if not reader.alive:  # pragma: no cover - a reader's loop does not end
                sock.close()
                stream.done.set()
                raise StreamConnectionError("the stream's reader thread ended")
        if stream.error is not None:
            raise stream.error
        return True

    def _reader_for(self, threads: int) -> StreamReader:
        with self._mu:
            while len(self._readers) < max(1, threads):
                self._readers.append(StreamReader(f"kickoff-stream-reader-{len(self._readers)}"))
            self._next = (self._next + 1) % max(1, threads)
            return self._readers[self._next]


#: The process's stream readers.
STREAM_READERS = StreamReaders()
