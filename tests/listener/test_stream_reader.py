"""The shared stream readers (listener.stream_reader): a few threads reading every NDJSON stream."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest
import requests

from listener.body import ListenerContext
from listener.errors import StreamConnectionError
from listener.exit_codes import ExitCode
from listener.match_listener import MatchListener
from listener.stream import OVERSIZE, FeedConnection, StreamConfig, reader_session
from listener.stream_reader import STREAM_READERS, ChunkedBody
from tests.listener.conftest import recorded, run_listener
from tests.waiting import wait_for

OURS = "7a1c3a6e-1d2b-4c8e-9a7f-2b1e6d4c8a10"
HEARTBEAT = b'{"heartbeat":{"interval":5000}}\n'


def _event(n: int) -> bytes:
    msg = {
        "payload": {"game": {"id": OURS, "status": "inprogress"}, "event": {"id": f"e{n}", "type": "pitch"}},
        "metadata": {"match": f"sd:match:{OURS}", "operation": "update"},
    }
    return json.dumps(msg).encode() + b"\n"


def _chunked(body: bytes, step: int) -> bytes:
    out = b"".join(
        b"%x\r\n" % len(body[i : i + step]) + body[i : i + step] + b"\r\n" for i in range(0, len(body), step)
    )
    return out + b"0\r\n\r\n"


# -- the chunked body ------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("piece", [1, 2, 3, 7, 1000])
def test_a_chunked_body_fed_in_any_pieces_decodes_to_the_same_bytes(piece):
    body = b"".join(_event(n) for n in range(20))
    wire = _chunked(body, 97)
    decoder = ChunkedBody()
    got = b"".join(b"".join(decoder.feed(wire[i : i + piece])) for i in range(0, len(wire), piece))
    assert got == body
    assert decoder.ended


@pytest.mark.unit
def test_chunk_extensions_and_trailers_are_passed_over():
    decoder = ChunkedBody()
    assert decoder.feed(b"5;name=value\r\nhello\r\n0\r\nExpires: never\r\n") == [b"hello"]
    assert not decoder.ended
    assert decoder.feed(b"\r\n") == []
    assert decoder.ended


@pytest.mark.unit
@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(b"zz\r\nhello\r\n", id="a-size-not-hex"),
        pytest.param(b"-5\r\nhello\r\n", id="a-negative-size"),
        pytest.param(b"1_0\r\nhello\r\n", id="an-underscore-int-would-take"),
        pytest.param(b"\r\nhello\r\n", id="no-size"),
        pytest.param(b"5\r\nhelloXX", id="data-not-followed-by-crlf"),
        pytest.param(b"1" * 2000, id="an-endless-size-line"),
    ],
)
def test_a_malformed_chunked_body_is_refused(wire):
    with pytest.raises(ValueError):
        ChunkedBody().feed(wire)


# -- on a listener ---------------------------------------------------------------------------


def _ctx(settings) -> ListenerContext:
    settings = settings.model_copy(
        update={"listener_sr_request_match_uuid": OURS, "listener_sr_url_league": "mlb"}
    )
    return ListenerContext(match_id="", record_id=None, is_test=False, settings=settings)


@pytest.mark.parametrize(("readers", "shared"), [(2, True), (0, False)], ids=["readers", "own-thread"])
def test_an_ndjson_stream_is_handled_on_a_reader_thread_unless_readers_are_off(
    raw_feed, listener_settings, monkeypatch, readers, shared
):
    body = b"".join(_event(n) for n in range(30)) + HEARTBEAT * 6
    feed = raw_feed(body, redirect=True)
    threads: set[str] = set()
    handle = MatchListener._handle

    def noting_thread(self, raw):
        threads.add(threading.current_thread().name)
        return handle(self, raw)

    monkeypatch.setattr(MatchListener, "_handle", noting_thread)
    settings = listener_settings(
        sportradar_base_url=feed.base_url,
        listener_stream_format="ndjson",
        listener_stream_readers=readers,
        listener_max_consecutive_heartbeats=5,
    )
    out = run_listener(_ctx(settings), timeout=20)
    assert out.code == ExitCode.MAX_HEARTBEATS
    assert [m["payload"]["event"]["id"] for m in recorded(out.listener)] == [f"e{n}" for n in range(30)]
    on_readers = {name.startswith("kickoff-stream-reader-") for name in threads}
    assert on_readers == {shared}


@pytest.fixture
def socket_feed() -> Iterator[tuple[str, list[socket.socket]]]:
    """A feed that answers each GET with its headers and first chunk in one write and keeps the
    connection for the test to write more (the accepted sockets in the list)."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.recv(65536)
            accepted.append(conn)  # before the write: a test that saw the first message writes more
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
                + _chunked(_event(0), 1 << 20)[:-5]  # the first message, not the last chunk
            )

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/stream", accepted
    server.close()
    for conn in accepted:
        conn.close()


def _open(url: str, session: requests.Session, *, max_line_bytes: int = 1 << 20) -> FeedConnection:
    config = StreamConfig(
        url=url, api_key="k", connect_timeout=5, read_timeout=30, max_line_bytes=max_line_bytes
    )
    return FeedConnection(config, session=session).open()


def _follow(conn: FeedConnection, got: list, stop: threading.Event | None = None) -> dict:
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["returned"] = STREAM_READERS.follow(
                conn, got.append, should_stop=(stop or threading.Event()).is_set, threads=2
            )
        except BaseException as exc:
            outcome["raised"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    outcome["thread"] = thread
    return outcome


def test_bytes_read_with_the_headers_are_not_lost_and_the_body_goes_on(socket_feed):
    url, accepted = socket_feed
    got: list = []
    with reader_session() as session:
        conn = _open(url, session, max_line_bytes=1000)
        outcome = _follow(conn, got)
        wait_for(lambda: len(got) == 1, timeout=20, what="the message sent with the headers")
        accepted[0].sendall(_chunked(_event(1) + b"x" * 5000 + b"\n" + _event(2), 3000))
        outcome["thread"].join(20)
        conn.close()
    assert got[0] == _event(0).rstrip(b"\n")
    assert got[1:] == [_event(1).rstrip(b"\n"), OVERSIZE, _event(2).rstrip(b"\n")]
    assert isinstance(outcome["raised"], StreamConnectionError)
    assert "stream ended by the server" in str(outcome["raised"])  # the last chunk came


def test_a_close_from_another_thread_ends_the_stream_at_once(socket_feed):
    url, _ = socket_feed
    got: list = []
    with reader_session() as session:
        conn = _open(url, session)
        outcome = _follow(conn, got)
        wait_for(lambda: got, timeout=20, what="the first message")
        conn.close()  # a stop's, or the silence watch's
        outcome["thread"].join(20)
        assert not outcome["thread"].is_alive()
        assert "stream closed while reading" in str(outcome["raised"])
        conn.close()  # the run's own close once the stream ended


def test_a_stop_after_a_message_returns_true(socket_feed):
    url, _ = socket_feed
    got: list = []
    stop = threading.Event()
    stop.set()
    with reader_session() as session:
        conn = _open(url, session)
        outcome = _follow(conn, got, stop)
        outcome["thread"].join(20)
        conn.close()
    assert outcome == {"returned": True, "thread": outcome["thread"]}
    assert len(got) == 1


def test_a_body_cut_mid_chunk_is_a_dropped_stream(raw_feed):
    feed = raw_feed(_event(0), redirect=False, truncate=True)
    got: list = []
    with reader_session() as session:
        conn = _open(f"{feed.base_url}/stream", session)
        outcome = _follow(conn, got)
        outcome["thread"].join(20)
        conn.close()
    assert got == [_event(0).rstrip(b"\n")]
    assert "stream dropped: ChunkedEncodingError" in str(outcome["raised"])


def test_an_sse_stream_is_left_to_its_own_thread(raw_feed):
    feed = raw_feed(b"data: {}\n\n", redirect=False, content_type="text/event-stream")
    with reader_session() as session:
        conn = _open(f"{feed.base_url}/stream", session)
        assert STREAM_READERS.follow(conn, print, should_stop=lambda: False, threads=2) is False
        conn.close()


def test_a_stream_opened_by_a_session_that_may_read_ahead_is_left_to_its_own_thread(socket_feed):
    """requests' own adapter reads body bytes with the headers, which a reader would never see."""
    url, _ = socket_feed
    with requests.Session() as session:
        conn = _open(url, session)
        assert STREAM_READERS.follow(conn, print, should_stop=lambda: False, threads=2) is False
        assert next(conn.messages()) == _event(0).rstrip(b"\n")  # read by this thread, none lost
        conn.close()


def test_a_status_reload_never_waits_for_a_database_slot_and_comes_once_one_is_free(
    listener_settings, make_match
):
    """A shared reader's other streams must not wait on one run's status read (a reload with every slot
    of the process's gate busy is put off to the next heartbeat, then done)."""
    from listener.archive import TextLog
    from listener.db_gate import db_gate
    from listener.match_info import MatchInfo

    match = make_match("mlb", sr_id=OURS, status="inprogress")
    settings = listener_settings(listener_status_reload_heartbeats=2)
    listener = MatchListener()
    listener._ctx = ListenerContext(match_id=str(match.id), record_id=None, is_test=False, settings=settings)
    listener._info = MatchInfo(sr_id=OURS, league="mlb", status="scheduled", has_row=True)
    listener._status = "scheduled"
    listener._log = TextLog(None)
    listener._idle = 0
    gate = db_gate(settings.listener_db_concurrency)
    held = 0
    while gate.acquire(blocking=False):
        held += 1
    try:
        for _ in range(3):
            listener._on_heartbeat()
        assert listener.stats.status_reloads == 0 and listener._reload_due
        assert listener._status == "scheduled"
    finally:
        for _ in range(held):
            gate.release()
    listener._on_heartbeat()  # the fourth: a slot is free, the reload put off comes now
    assert listener.stats.status_reloads == 1 and not listener._reload_due
    assert listener._status == "inprogress"
