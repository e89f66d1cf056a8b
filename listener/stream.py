"""The push-stream client: one match's feed as an iterator of raw JSON messages, with reconnects.

Two framings, chosen by the response's content type: ``text/event-stream`` is kickoff's SSE
framing (parsed with sseclient-py), anything else is the provider's newline-delimited JSON over
chunked HTTP. The provider answers the subscribe URL with a redirect to the stream host; the
client follows it itself (``allow_redirects=False``), as the provider's sample client does.
The API key travels only in the ``x-api-key`` header: it is never part of a URL we log or store,
and a redirect gets it only if it stays on the subscribe URL's scheme, host and port.
Lines longer than ``max_line_bytes`` are skipped without being buffered.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import requests
import requests.adapters
import sseclient
import urllib3
import urllib3.connection
from urllib3.exceptions import HTTPError as Urllib3HTTPError

from config.settings import mask_url
from listener.errors import StreamConnectionError, StreamDataError, StreamResumeRefused

logger = logging.getLogger(__name__)

OVERSIZE = object()  # marker yielded instead of a line longer than the limit
_MAX_REDIRECTS = 5
#: Bytes one read of the socket asks for: a burst's messages of one read go to the event log as one batch, and
#: fewer reads mean fewer waits for the GIL after each (a read releases it; processing threads hold it).
_CHUNK = 262144
#: The shortest silence a stream is given up for (a feed beating faster than this on a loaded machine
#: is not dead for one late beat).
MIN_SILENCE_SECONDS = 1.0

#: When this process last read a byte of any feed connection (monotonic; None: never). A worker whose
#: streams read bytes reaches the feed without a probe (lifecycle.feed_reach).
_last_feed_byte_at: float | None = None


def last_feed_byte_at() -> float | None:
    """When this process last read a byte from the feed (``time.monotonic()``; None: never)."""
    return _last_feed_byte_at


def note_feed_read(conn: FeedConnection) -> None:
    """``conn`` just read bytes from the feed (its silence, and the process's reach of the feed)."""
    global _last_feed_byte_at
    conn.last_read_at = _last_feed_byte_at = time.monotonic()


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``, the port made explicit for http/https (None if unparsable)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return ("", "", None)
    scheme = parts.scheme.lower()
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return (scheme, (parts.hostname or "").lower(), port)


def subscribe_url(*, base_url: str, path: str, league: str, access: str, sr_id: str, fmt: str) -> str:
    """The subscribe URL of one match's push stream (no key in it)."""
    query = {"match": f"sd:match:{sr_id}"}
    if fmt == "ndjson":
        query["format"] = "ndjson"
    rel = path.format(league=league.lower(), access=access)
    return f"{base_url.rstrip('/')}{rel}?{urlencode(query, safe=':')}"


class LineSplitter:
    """Splits a byte stream fed chunk by chunk into lines (without the newline); a line over
    ``max_bytes`` becomes OVERSIZE.

    An over-long line is dropped as it arrives, so memory stays bounded by the limit. A partial
    last line (the stream cut mid-line) is never returned: it is not a complete message.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._parts: list[bytes] = []
        self._pending = 0
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes | object]:
        """The lines ``chunk`` completes, in order."""
        out: list[bytes | object] = []
        if not chunk:
            return out
        max_bytes = self.max_bytes
        if b"\n" not in chunk:
            if not self._skipping:
                self._parts.append(chunk)
                self._pending += len(chunk)
                if self._pending > max_bytes:
                    self._skipping = True
                    self._parts, self._pending = [], 0
                    out.append(OVERSIZE)
            return out
        pieces = chunk.split(b"\n")
        if self._skipping:
            self._skipping = False
        else:
            parts = self._parts
            parts.append(pieces[0])
            line = b"".join(parts) if len(parts) > 1 else parts[0]
            if len(line) > max_bytes:
                out.append(OVERSIZE)
            else:
                out.append(line[:-1] if line.endswith(b"\r") else line)
        for line in pieces[1:-1]:
            if len(line) > max_bytes:
                out.append(OVERSIZE)
            else:
                out.append(line[:-1] if line.endswith(b"\r") else line)
        last = pieces[-1]
        self._parts, self._pending = ([last], len(last)) if last else ([], 0)
        if self._pending > max_bytes:
            self._skipping = True
            self._parts, self._pending = [], 0
            out.append(OVERSIZE)
        return out


def capped_lines(chunks: Iterator[bytes], max_bytes: int) -> Iterator[bytes | object]:
    """The lines of a chunk iterator (``LineSplitter``), as they complete."""
    splitter = LineSplitter(max_bytes)
    for chunk in chunks:
        yield from splitter.feed(chunk)


def feed_get(
    session: requests.Session,
    url: str,
    *,
    api_key: str,
    accept: str,
    timeout: tuple[float, float],
    stream: bool,
    what: str,
    match_id: str = "",
    closed: threading.Event | None = None,
) -> tuple[requests.Response, str]:
    """GET a feed URL, following redirects ourselves; returns the final response (any status) and its URL.

    The API key travels in ``x-api-key`` only to the first URL's scheme, host and port, never to a
    host a redirect names. Connection failures raise StreamConnectionError, other request errors
    StreamDataError, more than five redirects StreamDataError.
    """
    home = _origin(url)
    first = url
    for _ in range(_MAX_REDIRECTS + 1):
        if closed is not None and closed.is_set():
            raise StreamConnectionError(f"{what} closed while connecting")
        headers = {"x-api-key": api_key, "Accept": accept} if _origin(url) == home else {"Accept": accept}
        try:
            resp = session.get(url, headers=headers, stream=stream, timeout=timeout, allow_redirects=False)
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise StreamConnectionError(f"cannot connect to {mask_url(url)}: {type(exc).__name__}") from exc
        except requests.RequestException as exc:
            raise StreamDataError(f"bad request to {mask_url(url)}: {type(exc).__name__}") from exc
        if resp.is_redirect:
            location = resp.headers.get("Location", "")
            resp.close()
            url = urljoin(url, location)
            logger.info("match %s %s redirected to %s", match_id, what, mask_url(url))
            continue
        return resp, url
    raise StreamDataError(f"more than {_MAX_REDIRECTS} redirects from {mask_url(first)}")


def _message_of(resp: requests.Response) -> str:
    """The ``message`` of a JSON error body, else its first 200 characters (for a log line)."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200]
    message = body.get("message") if isinstance(body, dict) else None
    return str(message)[:200] if message else resp.text[:200]


class _UnbufferedResponse(http.client.HTTPResponse):
    """http.client's response reading its socket without a buffer: the headers are parsed a byte at a
    time and no byte of the body is read ahead with them, so a shared reader finds the whole body in
    the socket (http.client's own file would hold what came with the headers, out of a reader's reach)."""

    def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        buffered, self.fp = self.fp, sock.makefile("rb", buffering=0)
        buffered.close()  # nothing was read through it


class _UnbufferedConnection(urllib3.connection.HTTPConnection):
    response_class = _UnbufferedResponse


class _UnbufferedPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _UnbufferedConnection


class UnbufferedAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter whose plain-HTTP responses read nothing past their headers
    (``_UnbufferedResponse``), through urllib3's public pool and connection classes."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            **self.poolmanager.pool_classes_by_scheme,
            "http": _UnbufferedPool,
        }


def reader_session() -> requests.Session:
    """A session for streams a shared reader may take (``FeedConnection.take_socket``): plain HTTP
    through ``UnbufferedAdapter``. Use it for nothing else: a thread reading its body would read
    each chunk's size line a byte at a time."""
    session = requests.Session()
    session.mount("http://", UnbufferedAdapter())
    return session


@dataclass
class StreamConfig:
    """What the client needs to follow one match."""

    url: str  # subscribe URL (no secret in it)
    api_key: str
    connect_timeout: float
    read_timeout: float
    max_line_bytes: int
    match_id: str = ""
    #: How long the open stream may stay silent (no byte: no event and no heartbeat) before it is given
    #: up as dead, asked by the silence watch (None: ``read_timeout``). The run knows the feed's heartbeat
    #: interval once a heartbeat arrived (listener.recovery ``Recovery.silence_limit``).
    silence_seconds: Callable[[], float | None] | None = None
    #: How long the response's headers may take (None: ``read_timeout``; the body's reads wait the
    #: silence limit): a reconnect gives up on a feed that accepts connections but does not answer within
    #: what is left of its bound.
    first_byte_timeout: float | None = None
    #: Called on the reading thread before each read of the socket (one that may block): the listener
    #: hands over the messages of the last read as one batch (listener.ingest ``flush``).
    before_read: Callable[[], None] | None = None


class FeedConnection:
    """One HTTP connection to the push stream; ``messages()`` yields raw JSON texts (bytes)."""

    def __init__(self, config: StreamConfig, *, session: requests.Session) -> None:
        self.config = config
        self.session = session
        self.response: requests.Response | None = None
        self.content_type = ""
        self.final_url = ""
        self._closed = threading.Event()
        self.last_read_at = time.monotonic()  # the last chunk read (monotonic)
        self.silent_for: float | None = None  # set when the silence watch gave the stream up
        #: No silence limit of this stream is shorter (``silence_limit``): a stream read more recently
        #: is not silent, which the watch knows without asking the run.
        self.least_silence = min(MIN_SILENCE_SECONDS, config.read_timeout)
        #: Set while a shared reader reads this stream (listener.stream_reader): a close calls it, which
        #: asks the reader to end the stream (True; the reader holds its socket registered) or, once the
        #: stream ended, does nothing (False: the close goes on as for any stream).
        self.close_by_reader: Callable[[], bool] | None = None

    def open(self) -> FeedConnection:
        """Connect, follow redirects, check the status; raise StreamConnectionError / StreamDataError."""
        resp, url = feed_get(
            self.session,
            self.config.url,
            api_key=self.config.api_key,
            accept="text/event-stream, application/x-ndjson;q=0.9, application/json;q=0.8",
            timeout=(self.config.connect_timeout, self.config.first_byte_timeout or self.config.read_timeout),
            stream=True,
            what="stream",
            match_id=self.config.match_id,
            closed=self._closed,
        )
        self.response = resp
        if self._closed.is_set():
            # closed while the GET waited for the headers: close saw no response to shut down, so a
            # read now would block until the feed sends (a stop or the silence watch would be missed)
            resp.close()
            raise StreamConnectionError(f"stream closed while connecting to {mask_url(url)}")
        if resp.status_code == 410:
            resp.close()
            raise StreamResumeRefused(f"feed refused the resume at {mask_url(url)}: {_message_of(resp)}")
        if resp.status_code >= 500 or resp.status_code == 429:
            resp.close()
            raise StreamConnectionError(f"feed answered HTTP {resp.status_code} at {mask_url(url)}")
        if resp.status_code >= 400:
            resp.close()
            raise StreamDataError(f"feed answered HTTP {resp.status_code} at {mask_url(url)}")
        self.content_type = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
        self.final_url = mask_url(url)
        return self

    def messages(self) -> Iterator[bytes | object]:
        """Yield each message's JSON text (or OVERSIZE); StreamConnectionError when the connection drops."""
        assert self.response is not None
        raw = self._noting_reads(self.response.iter_content(chunk_size=_CHUNK))
        lines = capped_lines(raw, self.config.max_line_bytes)
        SILENCE_WATCH.watch(self)
        try:
            if self.content_type == "text/event-stream":
                yield from self._sse(lines)
            else:
                for line in lines:
                    if line is OVERSIZE or line.strip():  # type: ignore[union-attr]
                        yield line
        except (requests.ConnectionError, requests.Timeout, Urllib3HTTPError, OSError, ValueError) as exc:
            # ChunkedEncodingError (a truncated chunk) is a ConnectionError subclass; a socket we
            # shut down from request_stop or the silence watch surfaces as one of these too.
            raise StreamConnectionError(self.ended_why(f"stream dropped: {type(exc).__name__}")) from exc
        except requests.RequestException as exc:
            raise StreamConnectionError(self.ended_why(f"stream dropped: {type(exc).__name__}")) from exc
        except AttributeError as exc:
            # closed from another thread (the silence watch, a stop) while this one was between two reads:
            # urllib3 then reads from the response it has let go (``_fp`` is None), not from a socket
            if not self._closed.is_set():
                raise
            raise StreamConnectionError(self.ended_why("stream closed while reading")) from exc
        finally:
            SILENCE_WATCH.unwatch(self)
        raise StreamConnectionError(self.ended_why("stream ended by the server"))

    def ended_why(self, otherwise: str) -> str:
        """Why the stream ended: silent past its limit if the silence watch gave it up, else ``otherwise``."""
        return otherwise if self.silent_for is None else f"stream silent for {self.silent_for:.1f} s"

    def _noting_reads(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        """The response's chunks, noting when each was read (this connection's and the process's);
        ``before_read`` runs before each read."""
        self.last_read_at = time.monotonic()
        before_read = self.config.before_read
        chunks = iter(chunks)
        while True:
            if before_read is not None:
                before_read()
            chunk = next(chunks, None)
            if chunk is None:
                return
            note_feed_read(self)
            yield chunk

    def silence_limit(self) -> float:
        """How long this open stream may stay silent: the run's silence limit once it knows one (at least
        MIN_SILENCE_SECONDS), else the read timeout."""
        limit = self.config.silence_seconds() if self.config.silence_seconds is not None else None
        limit = self.config.read_timeout if limit is None else max(limit, MIN_SILENCE_SECONDS)
        return min(limit, self.config.read_timeout)

    def has_unread_bytes(self) -> bool:
        """Whether the feed sent bytes this process has not read yet (the connection's socket is
        readable): the stream is not silent, its reader is behind (a process starved of CPU, or a run
        waiting for room for its own writes)."""
        try:
            fd = self.response.raw.fileno()  # type: ignore[union-attr]
        except (AttributeError, OSError, ValueError):  # no response, or closed meanwhile
            return False
        poller = select.poll()  # not select(): a worker's sockets are past FD_SETSIZE
        try:
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):  # closed meanwhile
            return False

    def silenced(self) -> None:
        """The silence watch gave this stream up (silent past its limit): close it, and say why."""
        self.silent_for = time.monotonic() - self.last_read_at
        self.close()

    def _sse(self, lines: Iterator[bytes | object]) -> Iterator[bytes | object]:
        pending_oversize = []

        def source() -> Iterator[bytes]:
            for line in lines:
                if line is OVERSIZE:
                    pending_oversize.append(1)
                    continue
                yield line + b"\n"  # type: ignore[operator]

        for event in sseclient.SSEClient(source()).events():
            while pending_oversize:
                pending_oversize.pop()
                yield OVERSIZE
            yield event.data.encode()
        while pending_oversize:
            pending_oversize.pop()
            yield OVERSIZE

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def take_socket(self) -> tuple[socket.socket, bool] | None:
        """A non-blocking socket on the open stream's connection (a duplicate of its descriptor, which the
        caller closes) for a shared reader (listener.stream_reader), and whether the body is chunked;
        None when a reader cannot read it: a response not made through a ``reader_session`` (its client
        may hold body bytes read ahead with the headers), an SSE stream, a compressed or sized body."""
        resp = self.response
        if resp is None or self.content_type == "text/event-stream" or self.closed:
            return None
        if not isinstance(self.session.get_adapter(resp.url or self.config.url), UnbufferedAdapter):
            return None
        headers = resp.headers
        if headers.get("Content-Encoding", "identity").lower() not in ("", "identity"):
            return None
        chunked = "chunked" in headers.get("Transfer-Encoding", "").lower()
        if not chunked and "Content-Length" in headers:
            return None
        try:
            sock = socket.socket(fileno=os.dup(resp.raw.fileno()))
        except (OSError, ValueError):
            return None
        sock.setblocking(False)  # the descriptors share the flag: nothing reads the response's any more
        return sock, chunked

    def close(self) -> None:
        """Close from any thread: wakes a reader blocked in recv by shutting the socket down.

        urllib3's ``HTTPResponse.shutdown()`` (urllib3 >= 2.3) shuts the response's socket for
        reading, which makes a read blocked in another thread return at once (closing the socket
        would not wake it). It raises once the body ended and urllib3 released the connection:
        then no read is waiting. The response is closed afterwards.
        """
        self._closed.set()
        if self.close_by_reader is not None and self.close_by_reader():
            return  # its reader unregisters the socket; the run closes the response then
        resp = self.response
        if resp is None:
            return
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            resp.raw.shutdown()
        with contextlib.suppress(Exception):
            resp.close()


class SilenceWatch:
    """One thread per process that closes every open stream silent past its limit (``FeedConnection``
    ``silence_limit``): a black hole (packets dropped, the connection left open) shows only as silence,
    which the read timeout (30 s by default) would wait out. A stream whose socket holds bytes not read
    yet is not silent and is kept (``streams_to_give_up``). Started with the first stream watched."""

    #: How often the open streams are looked at (a stream is given up at most this long past its limit).
    #: Every 0.25 s the passes were a quarter of an idle 1,000-listener worker's Python samples (issue 34).
    PERIOD_SECONDS = 0.5

    #: At most one warning this often while streams past their limit hold unread bytes.
    BEHIND_LOG_SECONDS = 30.0

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._streams: set[FeedConnection] = set()
        self._thread: threading.Thread | None = None
        self._behind_told_at = float("-inf")

    def watch(self, conn: FeedConnection) -> None:
        with self._mu:
            self._streams.add(conn)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kickoff-stream-silence", daemon=True)
                self._thread.start()

    def unwatch(self, conn: FeedConnection) -> None:
        with self._mu:
            self._streams.discard(conn)

    def silent_streams(self, now: float) -> list[FeedConnection]:
        """The watched streams silent past their limit at ``now`` (monotonic)."""
        with self._mu:
            streams = list(self._streams)
        return [
            conn
            for conn in streams
            if (silent_for := now - conn.last_read_at) > conn.least_silence
            and silent_for > conn.silence_limit()
        ]

    def streams_to_give_up(self, now: float) -> list[FeedConnection]:
        """The silent streams (``silent_streams``) whose sockets hold no unread bytes. A stream past its
        limit with bytes waiting is not silent: its process is behind its feeds (starved of CPU), and
        giving it up would add a reconnect and a resume to a process already behind. (Issue 34's
        10,000-listener attempt on two cores: the workers held unread bytes on about a third of their
        streams while the watch gave thousands up; in a rerun with this check the streams given up had
        none, their simulators being late, so it did not stop that run's cascade.)"""
        behind = 0
        silent = []
        for conn in self.silent_streams(now):
            if conn.has_unread_bytes():
                behind += 1
            else:
                silent.append(conn)
        if behind and now - self._behind_told_at >= self.BEHIND_LOG_SECONDS:
            self._behind_told_at = now
            logger.warning(
                "%d streams past their silence limit hold bytes not read yet: this process is behind its "
                "feeds (CPU?), they are kept",
                behind,
            )
        return silent

    def _run(self) -> None:
        while True:
            time.sleep(self.PERIOD_SECONDS)
            try:
                self._give_up_silent()
            except Exception:  # the watch outlives any one pass: every stream depends on it
                logger.exception("silence watch pass failed")

    def _give_up_silent(self) -> None:
        for conn in self.streams_to_give_up(time.monotonic()):
            self.unwatch(conn)
            logger.info(
                "match %s stream silent for %.1f s (limit %.1f s): giving it up",
                conn.config.match_id,
                time.monotonic() - conn.last_read_at,
                conn.silence_limit(),
            )
            conn.silenced()


#: The process's silence watch (its thread starts with the first stream).
SILENCE_WATCH = SilenceWatch()
