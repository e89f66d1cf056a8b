"""A TCP fault proxy for tests: put it between kickoff and a shared service, then break the link.

The proxy listens on 127.0.0.1 (or ``host``: a test host's veth address, harness/hosts.py) on
``port`` and forwards every connection to ``target``. Point the
code under test at the proxy's port (``url_via``), never stop the shared service itself, and
switch modes while the test runs:

* ``forward()``: pass bytes both ways (the default). Connections that saw a black hole are
  closed first, since the bytes it swallowed make their stream unusable.
* ``refuse()``: the service is down. Open connections are cut (it returns how many) and new
  connects are refused (the listening socket is closed; it is bound again on the same port by the
  next mode).
* ``blackhole()``: the service hangs. Connects still complete (the kernel accepts them), but no
  byte reaches either side; reads on both sides just wait, so clients meet their timeouts.
* ``drop_replies()``: the service's answers are lost. Bytes still reach the service, nothing it
  sends back reaches the client (a publish the broker takes whose confirm never comes).
  Like a black hole, the swallowed bytes make a connection unusable: ``forward()`` closes it.
* ``cut()``: close every open connection now, with a reset, and return how many (the mode stays
  as it is).
* ``cut_on(match)``: close the next connection whose client sends bytes ``match`` accepts (e.g.
  an AMQP publish), before they reach the service; the returned event is set when it did.

When one side closes its end of a forwarding link, the proxy closes both with a FIN after the
bytes already forwarded (not a reset, which would drop the tail of an answer still in its
socket buffer), as a plain network would.

Thread-based: one accept thread, one thread per connection; ``stop()`` closes everything.
Usable as a context manager::

    with FaultProxy(("127.0.0.1", 5672)) as proxy:
        url = proxy.url_via("amqp://guest:guest@127.0.0.1:5672/vhost")
        proxy.refuse()
        ...
        proxy.forward()
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import struct
import threading
from collections.abc import Callable
from enum import StrEnum
from urllib.parse import urlsplit, urlunsplit

from harness.ports import free_port

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.05  # how often loops wake to see a mode change or stop()


class Mode(StrEnum):
    FORWARD = "forward"
    REFUSE = "refuse"
    BLACKHOLE = "blackhole"
    DROP_REPLIES = "drop_replies"


def _close(sock: socket.socket, *, reset: bool = False) -> None:
    with contextlib.suppress(OSError):
        if reset:  # RST instead of FIN: the peer sees "connection reset"
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


def _port_of(address: Callable[[], tuple[str, int]]) -> int:
    try:
        return int(address()[1])
    except OSError:  # already reset by the peer
        return 0


class _Link:
    """One client connection and, unless it was black-holed from the start, its upstream."""

    def __init__(self, client: socket.socket, upstream: socket.socket | None) -> None:
        self.client = client
        self.upstream = upstream
        self.closed = threading.Event()
        self.tainted = upstream is None  # swallowed bytes: the stream cannot be resumed
        self.client_port = _port_of(client.getpeername)
        self.upstream_port = None if upstream is None else _port_of(upstream.getsockname)

    def close(self, *, reset: bool = True) -> None:
        """Close both sides: with a reset (a cut), or with a FIN after the bytes already forwarded."""
        if not self.closed.is_set():
            self.closed.set()
            _close(self.client, reset=reset)
            if self.upstream is not None:
                _close(self.upstream, reset=reset)


#: The port a proxy binds (again): kept under this name for callers of the proxy module.
stable_port = free_port


class FaultProxy:
    """Forward ``host``:``port`` to ``target``; refuse, black-hole or cut connections on demand."""

    def __init__(
        self,
        target: tuple[str, int],
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        connect_timeout: float = 5.0,
    ) -> None:
        self.target = target
        self.host = host  # the address it listens on: loopback, or a test host's veth address
        self.connect_timeout = connect_timeout
        self._port = port
        self._mode = Mode.FORWARD
        self._lock = threading.Lock()
        self._links: set[_Link] = set()
        self._listener: socket.socket | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.accepted = 0  # connections accepted (any mode)
        self.cuts_on_match = 0  # connections cut_on() closed on the bytes it waited for
        self.bytes_to_clients = 0  # bytes forwarded from the target to clients (e.g. a close frame arrived)
        self.upstream_ports: set[int] = set()  # local ports of every upstream connection it opened
        self._armed: tuple[Callable[[bytes], bool], threading.Event] | None = None

    # -- life cycle -----------------------------------------------------------------

    @property
    def port(self) -> int:
        """The listening port (chosen by the kernel when 0 was given; fixed for the proxy's life)."""
        return self._port

    @property
    def mode(self) -> Mode:
        return self._mode

    def start(self) -> FaultProxy:
        """Bind the listening socket and start accepting."""
        self._bind()
        self._thread = threading.Thread(
            target=self._accept_loop, name=f"faultproxy:{self._port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting and close every connection."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._unbind()
        self.cut()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def url_via(self, url: str) -> str:
        """``url`` with its host and port replaced by the proxy's (user, path and query kept)."""
        parts = urlsplit(url)
        userinfo = parts.netloc.rpartition("@")[0]
        address = f"{self.host}:{self._port}"
        netloc = f"{userinfo}@{address}" if userinfo else address
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    # -- modes ------------------------------------------------------------------------

    def forward(self) -> None:
        """Pass bytes both ways; connections tainted by a black hole are closed first."""
        with self._lock:
            self._mode = Mode.FORWARD
            tainted = [link for link in self._links if link.tainted]
        for link in tainted:
            link.close()
        self._bind()

    def refuse(self) -> int:
        """Cut open connections and refuse new ones (like a stopped service); how many it cut."""
        with self._lock:
            self._mode = Mode.REFUSE
        self._unbind()
        return self.cut()

    def blackhole(self) -> None:
        """Swallow every byte both ways on open and new connections (like a hung service)."""
        with self._lock:
            self._mode = Mode.BLACKHOLE
            for link in self._links:
                link.tainted = True
        self._bind()

    def drop_replies(self) -> None:
        """Pass bytes to the service, swallow its answers (on open and new connections).

        Connections a black hole tainted are closed first: what it swallowed broke their stream.
        """
        with self._lock:
            tainted = [link for link in self._links if link.tainted]
        for link in tainted:
            link.close()
        with self._lock:
            self._mode = Mode.DROP_REPLIES
        self._bind()

    def cut(self) -> int:
        """Close every open connection now (with a reset); the mode is unchanged. How many it closed."""
        with self._lock:
            links = [link for link in self._links if not link.closed.is_set()]
        for link in links:
            link.close()
        return len(links)

    def cut_on(self, match: Callable[[bytes], bool]) -> threading.Event:
        """Cut the next connection whose client sends a chunk ``match`` accepts; that chunk is dropped.

        One cut per call (a later call replaces an earlier one not yet hit); the event is set
        once the connection was cut, and ``cuts_on_match`` counts every such cut.
        """
        hit = threading.Event()
        with self._lock:
            self._armed = (match, hit)
        return hit

    def cancel_cut_on(self) -> None:
        """Forget a ``cut_on`` not yet hit."""
        with self._lock:
            self._armed = None

    def _cut_here(self, data: bytes) -> bool:
        """True (and the armed cut used) when a client chunk is the one ``cut_on`` waits for."""
        with self._lock:
            if self._armed is None or not self._armed[0](data):
                return False
            _, hit = self._armed
            self._armed = None
            self.cuts_on_match += 1
        hit.set()
        return True

    def open_links(self) -> list[tuple[int, int | None]]:
        """``(client port, upstream local port)`` of every open connection (upstream None: black-holed)."""
        with self._lock:
            links = [link for link in self._links if not link.closed.is_set()]
        return [(link.client_port, link.upstream_port) for link in links]

    def cut_clients(self, ports: set[int]) -> int:
        """Close (with a reset) the open connections from client ``ports``; how many it closed."""
        with self._lock:
            links = [link for link in self._links if not link.closed.is_set() and link.client_port in ports]
        for link in links:
            link.close()
        return len(links)

    @property
    def connections(self) -> int:
        """Connections open right now."""
        with self._lock:
            return sum(not link.closed.is_set() for link in self._links)

    # -- internals --------------------------------------------------------------------

    def _bind(self) -> None:
        with self._lock:
            if self._listener is not None:
                return
            if self._port == 0:
                self._port = free_port(self.host)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._port))
            sock.listen(128)
            sock.setblocking(False)
            self._port = sock.getsockname()[1]
            self._listener = sock

    def _unbind(self) -> None:
        with self._lock:
            sock, self._listener = self._listener, None
        if sock is not None:
            # shutdown first: the accept thread may still hold the socket in select(), and
            # close() alone would keep it listening until that select returns.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            _close(sock)

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                listener = self._listener
            if listener is None:
                self._stopping.wait(POLL_SECONDS)
                continue
            try:
                ready, _, _ = select.select([listener], [], [], POLL_SECONDS)
                if not ready:
                    continue
                client, _ = listener.accept()
            except (OSError, ValueError):  # closed by refuse() meanwhile
                continue
            self.accepted += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        if self._mode in (Mode.FORWARD, Mode.DROP_REPLIES):
            try:
                upstream = socket.create_connection(self.target, timeout=self.connect_timeout)
                self.upstream_ports.add(upstream.getsockname()[1])
            except OSError as exc:
                logger.debug("fault proxy: upstream %s refused: %s", self.target, exc)
                _close(client, reset=True)
                return
        elif self._mode is Mode.REFUSE:
            _close(client, reset=True)
            return
        link = _Link(client, upstream)
        with self._lock:
            self._links.add(link)
        ended = False
        try:
            ended = self._pump(link)
        finally:
            link.close(reset=not ended)
            with self._lock:
                self._links.discard(link)

    def _pump(self, link: _Link) -> bool:
        """Forward until the link ends; True when one side closed its end while bytes passed.

        Such an end is passed on as a close (a FIN after what was forwarded, not a reset): a reset
        would throw away the tail still in the socket's send buffer, e.g. the end of a response
        the service sent just before its close.
        """
        socks = [link.client] if link.upstream is None else [link.client, link.upstream]
        while not link.closed.is_set() and not self._stopping.is_set():
            try:
                ready, _, _ = select.select(socks, [], [], POLL_SECONDS)
            except (OSError, ValueError):
                return False
            for sock in ready:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return False
                if not data:
                    return self._mode is Mode.FORWARD and not link.tainted
                passes = self._mode is Mode.FORWARD and not link.tainted
                if self._mode is Mode.DROP_REPLIES:  # towards the service only
                    passes = sock is link.client and link.upstream is not None
                if not passes:
                    link.tainted = True
                    continue  # swallowed
                if sock is link.client and self._cut_here(data):
                    return False  # closed (with a reset) by _serve
                other = link.upstream if sock is link.client else link.client
                try:
                    other.sendall(data)
                except OSError:
                    return False
                if other is link.client:
                    with self._lock:
                        self.bytes_to_clients += len(data)
        return False
