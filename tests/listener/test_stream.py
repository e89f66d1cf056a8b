"""The stream client and the listener against raw feeds: provider NDJSON shape, malformed lines, errors."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import requests

from config.settings import mask_url
from listener.body import ListenerContext
from listener.errors import StreamConnectionError
from listener.exit_codes import ExitCode
from listener.stream import (
    MIN_SILENCE_SECONDS,
    OVERSIZE,
    FeedConnection,
    SilenceWatch,
    StreamConfig,
    capped_lines,
)
from models import League, Match
from tests.listener.conftest import FIXTURES, recorded, run_listener
from tests.waiting import wait_for

OURS = "5f0c3a6e-1d2b-4c8e-9a7f-2b1e6d4c8a10"
HEARTBEAT = b'{"heartbeat":{"interval":5000}}\n'


def _ctx(settings, match=None, *, sr_id=OURS) -> ListenerContext:
    if match is None:
        settings = settings.model_copy(
            update={"listener_sr_request_match_uuid": sr_id, "listener_sr_url_league": "mlb"}
        )
    return ListenerContext(
        match_id=str(match.id) if match else "", record_id=None, is_test=False, settings=settings
    )


def _event(sr_id: str = OURS, n: int = 1, status: str = "inprogress") -> bytes:
    msg = {
        "payload": {"game": {"id": sr_id, "status": status}, "event": {"id": f"e{n}", "type": "pitch"}},
        "metadata": {"match": f"sd:match:{sr_id}", "operation": "update"},
    }
    return json.dumps(msg).encode() + b"\n"


def test_the_providers_ndjson_shape_behind_a_redirect_is_parsed(raw_feed, listener_settings, make_match):
    body = (FIXTURES / "provider_push_stream.ndjson").read_bytes()
    feed = raw_feed(body + HEARTBEAT * 8, redirect=True)
    match = make_match("mlb", sr_id=OURS, status="scheduled")
    settings = listener_settings(
        sportradar_base_url=feed.base_url,
        listener_stream_format="ndjson",
        listener_max_consecutive_heartbeats=6,
    )
    out = run_listener(_ctx(settings, match), timeout=10)
    assert out.code == ExitCode.MAX_HEARTBEATS
    sent = [json.loads(line) for line in body.splitlines()]
    ours = [m for m in sent if m.get("metadata", {}).get("match") == f"sd:match:{OURS}"]
    assert recorded(out.listener) == ours  # other matches' events and heartbeats left out
    assert out.listener.stats.events == len(ours) == 8
    assert Match.get_by_id(match.id).status == "inprogress"
    first_path, headers = feed.requests[0]
    assert feed.requests[1][0].startswith("/stream-host/")  # the redirect was followed
    assert "match=sd:match:" + OURS in first_path and "api_key" not in first_path
    assert headers.get("x-api-key") == "test-api-key-never-printed"


@pytest.mark.parametrize(
    ("target", "key_sent"),
    [
        pytest.param("same-origin", True, id="same-host-and-port-gets-the-key"),
        pytest.param("other-origin", False, id="another-host-or-port-does-not"),
    ],
)
def test_the_api_key_follows_a_redirect_only_to_the_feeds_own_origin(raw_feed, target, key_sent):
    stream_host = raw_feed(_event(), redirect=False)
    redirect_to = "" if target == "same-origin" else stream_host.base_url
    feed = raw_feed(_event(), redirect=True, redirect_to=redirect_to)
    config = StreamConfig(
        url=f"{feed.base_url}/subscribe?match=sd:match:{OURS}",
        api_key="test-api-key-never-printed",
        connect_timeout=5,
        read_timeout=5,
        max_line_bytes=1 << 20,
    )
    with requests.Session() as session:
        conn = FeedConnection(config, session=session).open()
        conn.response.close()
    assert feed.requests[0][1].get("x-api-key") == "test-api-key-never-printed"
    followed = feed.requests[1] if target == "same-origin" else stream_host.requests[0]
    assert followed[0].startswith("/stream-host/")
    assert ("x-api-key" in {k.lower() for k in followed[1]}) is key_sent


def test_the_api_key_is_never_logged_or_archived(raw_feed, listener_settings, caplog):
    feed = raw_feed(_event() + HEARTBEAT * 3, redirect=True)
    settings = listener_settings(sportradar_base_url=feed.base_url, listener_reconnect_attempts=1)
    with caplog.at_level(logging.DEBUG):
        out = run_listener(_ctx(settings), timeout=10)
    key = "test-api-key-never-printed"
    assert key not in caplog.text
    assert key not in out.listener.archive.path.read_text()
    assert "***" in mask_url("http://h/x?api_key=" + key) and key not in mask_url("http://u:" + key + "@h/")


@pytest.mark.parametrize(
    ("body", "skipped"),
    [
        (b"{not json\n" + _event(), 1),
        (b'{"payload": {"game": ' + b"x" * (10 * 1024 * 1024) + b"}}\n" + _event(), 1),
        (b'{"something_new":{"a":1}}\n[1,2]\n"text"\n' + _event(), 3),
    ],
    ids=["invalid-json", "ten-megabyte-line", "unknown-types"],
)
def test_a_malformed_line_is_skipped_with_a_log_and_the_stream_goes_on(
    raw_feed, listener_settings, body, skipped
):
    feed = raw_feed(body + HEARTBEAT * 4, redirect=False)
    settings = listener_settings(sportradar_base_url=feed.base_url, listener_max_consecutive_heartbeats=3)
    t0 = time.monotonic()
    out = run_listener(_ctx(settings), timeout=20)
    assert out.code == ExitCode.MAX_HEARTBEATS
    assert out.listener.stats.skipped == skipped
    assert out.listener.stats.events == 1
    assert time.monotonic() - t0 < 10


def test_too_many_unreadable_lines_in_a_row_exit_11(raw_feed, listener_settings):
    feed = raw_feed(b"garbage\n" * 30, redirect=False)
    settings = listener_settings(sportradar_base_url=feed.base_url, listener_max_bad_lines=5)
    out = run_listener(_ctx(settings), timeout=10)
    assert out.code == ExitCode.DATA_ERROR
    assert "unreadable" in out.listener.exit_reason


def test_a_truncated_chunk_reconnects_then_gives_up_with_12(raw_feed, listener_settings):
    feed = raw_feed(_event() + HEARTBEAT, redirect=False, truncate=True)
    settings = listener_settings(sportradar_base_url=feed.base_url, listener_reconnect_attempts=2)
    out = run_listener(_ctx(settings), timeout=10)
    assert out.code == ExitCode.CONNECTION_ERROR
    assert len(feed.requests) == 3  # first connection and two reconnects
    # The complete line before each cut was kept, once: the two copies sent again are duplicates.
    assert (out.listener.stats.events, out.listener.stats.duplicates) == (1, 2)


def test_an_http_error_from_the_feed_exits_11(raw_feed, listener_settings):
    feed = raw_feed(b"", redirect=False, status=401)
    out = run_listener(_ctx(listener_settings(sportradar_base_url=feed.base_url)), timeout=10)
    assert out.code == ExitCode.DATA_ERROR
    assert "401" in out.listener.exit_reason


def test_a_feed_that_cannot_be_reached_exits_12_after_reconnects(listener_settings):
    settings = listener_settings(sportradar_base_url="http://127.0.0.1:9", listener_reconnect_attempts=1)
    out = run_listener(_ctx(settings), timeout=10)
    assert out.code == ExitCode.CONNECTION_ERROR
    assert out.listener.stats.reconnects == 1


def test_a_hostile_league_name_in_the_database_is_refused_with_11(listener_settings, db):
    league = League.create(name="../../outside")
    match = Match.create(sr_id=str(uuid.uuid4()), league=league, scheduled="2024-05-21T18:00:00+00:00")
    out = run_listener(_ctx(listener_settings(), match), timeout=5)
    assert out.code == ExitCode.DATA_ERROR
    assert "refusing league" in out.listener.exit_reason


def test_capped_lines_drops_an_over_long_line_without_buffering_it():
    chunks = [b"a" * 6, b"a" * 6, b"a" * 6, b"\nok\n", b"tail"]
    assert list(capped_lines(iter(chunks), 10)) == [OVERSIZE, b"ok"]


def _sse(data: bytes, event: bytes = b"event") -> bytes:
    return b"event: " + event + b"\ndata: " + data + b"\n\n"


@pytest.mark.parametrize(
    ("body", "skipped"),
    [
        (_sse(b"{not json") + _sse(_event().strip()), 1),
        (_sse(b'{"payload": "' + b"x" * (10 * 1024 * 1024) + b'"}') + _sse(_event().strip()), 1),
        (_sse(b'{"surprise": 1}', b"mystery") + _sse(_event().strip()), 1),
    ],
    ids=["sse-invalid-json", "sse-ten-megabyte-line", "sse-unknown-type"],
)
def test_malformed_sse_events_are_skipped_too(raw_feed, listener_settings, body, skipped):
    hb = _sse(HEARTBEAT.strip(), b"heartbeat")
    feed = raw_feed(body + hb * 4, redirect=False, content_type="text/event-stream")
    settings = listener_settings(sportradar_base_url=feed.base_url, listener_max_consecutive_heartbeats=3)
    out = run_listener(_ctx(settings), timeout=20)
    assert out.code == ExitCode.MAX_HEARTBEATS
    assert (out.listener.stats.skipped, out.listener.stats.events) == (skipped, 1)


def test_the_capture_replayed_on_every_reconnect_and_bad_lines_leave_each_message_once_in_the_log(
    raw_feed, listener_settings, make_match
):
    """The provider's capture (fixture imitating ../shared/feeds) sent whole again on every reconnect,
    with a NUL in a message, a line that is not UTF-8 and one over the size limit: the event log holds
    each distinct message once, the NUL one byte for byte, the non-UTF-8 line as an unreadable row."""
    from models.event_log import pages_of

    body = (FIXTURES / "provider_push_stream.ndjson").read_bytes()
    nul = _event(n=99).replace(b'"pitch"', b'"pi\\u0000tch"')
    not_utf8 = b'{"payload": "\xff\xfe"}\n'
    oversize = b'{"pad":"' + b"x" * 3000 + b'"}\n'
    feed = raw_feed(body + nul + not_utf8 + oversize + HEARTBEAT, redirect=False)
    match = make_match("mlb", sr_id=OURS, status="inprogress")
    settings = listener_settings(
        sportradar_base_url=feed.base_url,
        listener_stream_format="ndjson",
        listener_reconnect_attempts=3,
        listener_reconnect_backoff_seconds=0.0,
        listener_max_line_bytes=2000,
        listener_backfill=False,
    )
    ctx = ListenerContext(
        match_id=str(match.id), record_id=str(uuid.uuid4()), is_test=False, settings=settings
    )
    out = run_listener(ctx, timeout=20)
    assert out.code == ExitCode.CONNECTION_ERROR and len(feed.requests) == 4  # the capture sent four times
    ours = [
        m
        for m in map(json.loads, body.splitlines())
        if m.get("metadata", {}).get("match") == f"sd:match:{OURS}"
    ]
    logged = recorded(out.listener)
    gaps = [m for m in logged if m.get("kickoff", {}).get("marker") == "gap"]
    assert [m for m in logged if m not in gaps] == [*ours, json.loads(nul)]  # each once, the NUL kept
    # each of the three reconnects closed a gap, written as a marker for the card's timeline
    assert [g["kickoff"]["how"] for g in gaps] == ["reconnected"] * 3
    rows = [r for page in pages_of(match.id) for r in page]
    [unreadable] = [r for r in rows if r.kind == "unreadable"]
    assert unreadable.message["kickoff"]["unreadable"] == "invalid UTF-8"
    assert out.listener.stats.events == len(ours) + 1 and out.listener.stats.skipped >= 8


def _frame(content_type: str, message: bytes = HEARTBEAT) -> bytes:
    """One chunk of a chunked response holding ``message`` in ``content_type``'s framing."""
    line = b"data: " + message.strip() + b"\n\n" if content_type == "text/event-stream" else message
    return b"%x\r\n%s\r\n" % (len(line), line)


@pytest.fixture
def held_open_feed() -> Iterator[Callable[..., str]]:
    """``held_open_feed(content_type, send_more=None)``: a feed URL that answers one stream with one
    heartbeat and keeps the connection open (its reader is never woken by the server); a second heartbeat
    follows once ``send_more`` is set."""
    release = threading.Event()
    servers: list[socket.socket] = []

    def start(content_type: str = "application/x-ndjson", send_more: threading.Event | None = None) -> str:
        server = socket.create_server(("127.0.0.1", 0))
        servers.append(server)

        def serve() -> None:
            peer, _ = server.accept()
            with peer:
                peer.recv(65536)
                peer.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type.encode() + b"\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n" + _frame(content_type)
                )
                if send_more is not None and send_more.wait(30):
                    peer.sendall(_frame(content_type))
                release.wait(30)

        threading.Thread(target=serve, daemon=True).start()
        return f"http://127.0.0.1:{server.getsockname()[1]}/stream"

    yield start
    release.set()
    for server in servers:
        server.close()


def _open_at_first_message(url: str, session: requests.Session) -> tuple[FeedConnection, Iterator[object]]:
    """A connection to ``url`` and its messages, the first (a heartbeat) read."""
    config = StreamConfig(url=url, api_key="k", connect_timeout=5, read_timeout=5, max_line_bytes=1 << 20)
    conn = FeedConnection(config, session=session).open()
    messages = conn.messages()
    assert json.loads(next(messages)) == {"heartbeat": {"interval": 5000}}
    return conn, messages


@pytest.mark.parametrize("content_type", ["application/x-ndjson", "text/event-stream"])
def test_a_close_from_another_thread_between_two_reads_ends_the_stream_as_dropped_not_a_crash(
    content_type, held_open_feed
):
    """The silence watch (or a stop) closes a stream while its reader is between two reads, not blocked in
    one: the next read finds the response closed. That is a dropped stream (StreamConnectionError: the
    run reconnects), never an AttributeError out of urllib3 (a crash, exit 9: issue 34's 10,000-listener
    run met it 968 times in two minutes)."""
    with requests.Session() as session:
        conn, messages = _open_at_first_message(held_open_feed(content_type), session)
        conn.close()  # what the silence watch does from its own thread
        with pytest.raises(StreamConnectionError):
            next(messages)


def test_a_close_while_the_stream_waits_for_its_headers_ends_the_open_instead_of_a_blocked_read(
    held_open_feed,
):
    """A stop (or the silence watch) that comes while the GET waits for the feed's headers finds no
    response to shut down. The open must then fail as a dropped stream: handing the socket to a read
    would block it until the feed next sends (an operator's stop missed for a heartbeat interval, CI's
    ``test_an_operator_stop_ends_the_default_body_with_15``)."""
    conns: list[FeedConnection] = []

    class ClosedDuringTheGet(requests.Session):
        def get(self, *args, **kwargs):  # type: ignore[override]
            resp = super().get(*args, **kwargs)
            conns[0].close()  # from another thread, between the headers' arrival and open's next step
            return resp

    config = StreamConfig(
        url=held_open_feed(), api_key="k", connect_timeout=5, read_timeout=5, max_line_bytes=1 << 20
    )
    with ClosedDuringTheGet() as session:
        conns.append(FeedConnection(config, session=session))
        with pytest.raises(StreamConnectionError, match="closed while connecting"):
            conns[0].open()
        assert conns[0].response is not None and conns[0].response.raw.closed


def test_the_silence_watch_finds_the_streams_silent_past_their_limit():
    asked: list[str] = []

    def connection(name: str, *, silent_for: float, limit: float | None, read_timeout: float = 30.0):
        def silence_seconds() -> float | None:
            asked.append(name)
            return limit

        config = StreamConfig(
            url="http://127.0.0.1:9/s",
            api_key="k",
            connect_timeout=1,
            read_timeout=read_timeout,
            max_line_bytes=1024,
            silence_seconds=silence_seconds,
        )
        conn = FeedConnection(config, session=None)  # type: ignore[arg-type]
        conn.last_read_at = now - silent_for
        return conn

    now = time.monotonic()
    watch = SilenceWatch()
    streams = {
        "fresh": connection("fresh", silent_for=MIN_SILENCE_SECONDS / 2, limit=0.1),
        "within-limit": connection("within-limit", silent_for=5.0, limit=15.0),
        "past-limit": connection("past-limit", silent_for=16.0, limit=15.0),
        "no-heartbeat-yet": connection("no-heartbeat-yet", silent_for=31.0, limit=None),
        "short-read-timeout": connection("short-read-timeout", silent_for=0.4, limit=None, read_timeout=0.3),
    }
    for conn in streams.values():
        watch._streams.add(conn)
    found = {name for name, conn in streams.items() if conn in watch.silent_streams(now)}
    # a limit under MIN_SILENCE_SECONDS counts as it; no limit yet: the read timeout
    assert found == {"past-limit", "no-heartbeat-yet", "short-read-timeout"}
    # a stream read more recently than any limit can be is not asked for its limit (a pass is cheap)
    assert set(asked) == set(streams) - {"fresh"}


def test_a_stream_past_its_silence_limit_with_bytes_waiting_is_kept_and_a_silent_one_given_up(
    caplog, held_open_feed
):
    """A starved process (issue 34's 10,000-listener attempt) reads late: its streams' sockets hold bytes
    while their last read ages past the limit. Those are not silent; giving them up would add a
    reconnect and a resume each. A stream whose feed sent nothing more is silent, as before."""
    more = threading.Event()
    watch = SilenceWatch()
    with requests.Session() as session:
        behind, _b = _open_at_first_message(held_open_feed(send_more=more), session)
        silent, _s = _open_at_first_message(held_open_feed(), session)
        more.set()  # the second heartbeat arrives while the reader is not reading
        wait_for(behind.has_unread_bytes, timeout=30, what="the second frame waiting in the socket")
        assert not silent.has_unread_bytes()
        for conn in (behind, silent):
            conn.last_read_at = time.monotonic() - 60  # past the 5 s limit
            watch._streams.add(conn)
        now = time.monotonic()
        assert set(watch.silent_streams(now)) == {behind, silent}
        with caplog.at_level(logging.WARNING, logger="listener.stream"):
            assert watch.streams_to_give_up(now) == [silent]
        assert "1 streams past their silence limit hold bytes not read yet" in caplog.text
        silent.close()
        assert not silent.has_unread_bytes()  # closed: no socket to ask, no error
        behind.close()
