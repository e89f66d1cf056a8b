"""The test fault proxy itself: forward, refuse, black-hole, drop replies and cut, against local servers."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from harness.faultproxy import FaultProxy
from tests.waiting import wait_for


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(4096):
                self.request.sendall(data)
        except ConnectionResetError:  # the proxy cut the link
            pass


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address
    server.shutdown()
    server.server_close()


def _roundtrip(sock: socket.socket, payload: bytes = b"ping") -> bytes:
    sock.sendall(payload)
    return sock.recv(4096)


def test_forward_refuse_blackhole_and_cut(echo):
    with FaultProxy(echo) as proxy:
        addr = ("127.0.0.1", proxy.port)
        with socket.create_connection(addr, timeout=5) as sock:
            assert _roundtrip(sock) == b"ping"

        proxy.refuse()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(addr, timeout=5)

        proxy.blackhole()
        with socket.create_connection(addr, timeout=0.5) as sock, pytest.raises(TimeoutError):
            _roundtrip(sock)  # connects, never answers

        proxy.forward()
        with socket.create_connection(addr, timeout=5) as sock:
            assert _roundtrip(sock) == b"ping"
            assert proxy.cut() == 1
            assert _closed_by_peer(sock)
        wait_for(lambda: proxy.connections == 0, what="the cut link gone")
        assert proxy.cut() == 0


def _closed_by_peer(sock: socket.socket) -> bool:
    """True when the peer closed (EOF) or reset the connection."""
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True


def test_an_open_connection_is_swallowed_by_a_blackhole_and_closed_when_it_heals(echo):
    with FaultProxy(echo) as proxy:
        sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        assert _roundtrip(sock) == b"ping"
        proxy.blackhole()
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            _roundtrip(sock)
        proxy.forward()
        sock.settimeout(5)
        assert _closed_by_peer(sock)  # never resumed with a gap in the stream
        sock.close()


class _Recorder(_Echo):
    """An echo server that also keeps what it received."""

    received: list[bytes] = []

    def handle(self) -> None:
        try:
            while data := self.request.recv(4096):
                self.received.append(data)
                self.request.sendall(data)
        except ConnectionResetError:
            pass


def test_dropped_replies_reach_the_service_but_never_the_client_and_forward_closes_the_link():
    _Recorder.received = []
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Recorder)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with FaultProxy(server.server_address) as proxy:
            addr = ("127.0.0.1", proxy.port)
            with socket.create_connection(addr, timeout=5) as sock:
                assert _roundtrip(sock, b"before") == b"before"
                proxy.drop_replies()
                sock.settimeout(0.5)
                with pytest.raises(TimeoutError):
                    _roundtrip(sock, b"lost-answer")  # the service got it; its echo is swallowed
                wait_for(lambda: b"lost-answer" in b"".join(_Recorder.received), what="the service got it")
                proxy.forward()
                assert _closed_by_peer(sock)  # its stream lost bytes: closed, not resumed
            with socket.create_connection(addr, timeout=5) as sock:
                assert _roundtrip(sock, b"after") == b"after"
    finally:
        server.shutdown()
        server.server_close()


def test_cut_on_closes_the_connection_that_sends_the_matching_bytes_before_they_arrive(echo):
    with FaultProxy(echo) as proxy:
        addr = ("127.0.0.1", proxy.port)
        with (
            socket.create_connection(addr, timeout=5) as other,
            socket.create_connection(addr, timeout=5) as sock,
        ):
            hit = proxy.cut_on(lambda data: data.startswith(b"publish"))
            assert _roundtrip(sock, b"hello") == b"hello"  # not a match: forwarded
            assert not hit.is_set()
            sock.sendall(b"publish 1")
            assert _closed_by_peer(sock)  # cut, and the bytes never echoed
            assert hit.wait(5) and proxy.cuts_on_match == 1
            sock.close()
            assert _roundtrip(other, b"publish 2") == b"publish 2"  # one cut per cut_on
        assert proxy.cuts_on_match == 1


def test_a_service_closing_after_its_answer_closes_the_client_after_every_byte_of_it():
    answer = bytes(range(256)) * 16384  # 4 MiB: more than the sockets buffer, so a reset would cut its tail
    with socket.create_server(("127.0.0.1", 0)) as service:

        def answer_and_close() -> None:
            conn, _ = service.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(answer)

        threading.Thread(target=answer_and_close, daemon=True).start()
        with (
            FaultProxy(service.getsockname()) as proxy,
            socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock,
        ):
            sock.sendall(b"ask")
            received = bytearray()
            while chunk := sock.recv(65536):  # a reset here: ConnectionResetError
                received += chunk
            assert bytes(received) == answer
