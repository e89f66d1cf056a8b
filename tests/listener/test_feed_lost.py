"""A stream whose feed goes silent is given up at the silence, and a run whose feed stays lost gives
its match back (docs/reliability.md finding 5).

A black hole (packets dropped, the connection left open) shows only as silence: the stream is
given up once it was silent for LISTENER_GAP_HEARTBEATS of the feed's heartbeat intervals (not the
30 s read timeout), and reconnects; when its reconnects keep failing until LISTENER_FEED_LOST_SECONDS
since the feed was last heard, the run ends (12) with ``feed_lost`` set, which the start turns into
a restart elsewhere (tests/lifecycle/test_prompt_restarts.py).
"""

from __future__ import annotations

import socket
import threading
import uuid

import pytest
import requests

from harness.faultproxy import FaultProxy
from listener.body import ListenerContext, body_lost_feed
from listener.errors import StreamConnectionError
from listener.exit_codes import ExitCode
from listener.stream import FeedConnection, StreamConfig
from models import MatchListenerRecord
from srsim.script import GameScript
from tests.listener.conftest import start_listener
from tests.waiting import wait_for

#: Longer than any wait below: a stream given up within it was given up at its silence.
READ_TIMEOUT_SECONDS = 60.0


def _silent_feed(server: socket.socket, stop: threading.Event) -> None:
    """Answer one stream request with a heartbeat, then send nothing (a black hole past the headers)."""
    client, _ = server.accept()
    with client:
        client.recv(65536)
        beat = b'{"heartbeat":{"interval":200}}\n'
        client.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
            + f"{len(beat):x}\r\n".encode()
            + beat
            + b"\r\n"
        )
        stop.wait(READ_TIMEOUT_SECONDS * 2)


def test_a_stream_silent_past_its_limit_is_given_up_long_before_the_read_timeout():
    stop = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as server:
        threading.Thread(target=_silent_feed, args=(server, stop), daemon=True).start()
        host, port = server.getsockname()
        config = StreamConfig(
            url=f"http://{host}:{port}/stream?match=sd:match:1",
            api_key="k",
            connect_timeout=5.0,
            read_timeout=READ_TIMEOUT_SECONDS,
            max_line_bytes=1_000_000,
            silence_seconds=lambda: 1.0,  # the run's limit: heartbeat interval times LISTENER_GAP_HEARTBEATS
        )
        conn = FeedConnection(config, session=requests.Session()).open()
        seen: list[bytes | object] = []
        raised: list[StreamConnectionError] = []

        def read() -> None:
            try:
                seen.extend(conn.messages())
            except StreamConnectionError as exc:
                raised.append(exc)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(READ_TIMEOUT_SECONDS / 2)
        stop.set()
        conn.close()
    assert raised, "the silent stream was not given up before half the read timeout"
    assert str(raised[0]).startswith("stream silent for"), raised[0]
    assert seen == [b'{"heartbeat":{"interval":200}}']


def _lost_at_4_s(listener_settings, base_url: str, **more: float):
    """Settings of a run behind ``base_url`` whose feed is lost 4 s after it was last heard (the bound
    decides, not the reconnect count), reconnecting every 0.2-0.5 s."""
    return listener_settings(
        sportradar_base_url=base_url,
        listener_reconnect_attempts=100,
        listener_reconnect_backoff_seconds=0.2,
        listener_reconnect_backoff_max_seconds=0.5,
        listener_feed_lost_seconds=4.0,
        **more,
    )


@pytest.mark.parametrize("cut", ["blackhole", "refuse"])
def test_a_run_whose_feed_stays_lost_gives_its_match_back(sim, listener_settings, make_match, cut):
    game = GameScript(
        sr_id=str(uuid.uuid4()), league="mlb", start_after=0.3, event_interval=0.1, event_count=2000
    )
    match = make_match("mlb", sr_id=game.sr_id)
    server = sim([game], resume=True, heartbeat_seconds=0.05)
    with FaultProxy(("127.0.0.1", server.port)) as proxy:
        settings = _lost_at_4_s(
            listener_settings,
            proxy.url_via(server.base_url),
            listener_read_timeout_seconds=READ_TIMEOUT_SECONDS,
            listener_connect_timeout_seconds=READ_TIMEOUT_SECONDS,
            listener_gap_heartbeats=20,  # 1 s of silence at 0.05 s beats
        )
        record = MatchListenerRecord.create(match=match)
        ctx = ListenerContext(
            match_id=str(match.id), record_id=str(record.id), is_test=False, settings=settings
        )
        out = start_listener(ctx)
        wait_for(lambda: out.listener.stats.events >= 5, timeout=30, what="5 events recorded")
        getattr(proxy, cut)()
        assert out.thread is not None
        out.thread.join(READ_TIMEOUT_SECONDS / 2)
        assert not out.thread.is_alive(), "the run did not give its match back before half the read timeout"
    assert out.code == ExitCode.CONNECTION_ERROR, out.listener.exit_reason
    assert out.listener.exit_reason.startswith("feed lost for"), out.listener.exit_reason
    assert body_lost_feed(out.listener)
    assert out.listener.stats.reconnects >= 1  # it reconnected before giving the match back


@pytest.mark.parametrize(
    "reached", [False, True], ids=["its worker finds the feed away", "its worker reaches it"]
)
def test_a_run_never_live_gives_its_match_back_at_its_first_failed_connect_once_its_worker_lost_the_feed(
    sim, listener_settings, make_match, reached
):
    """A start taken just before its host was cut from the feed (docs/reliability.md finding 13): once
    the worker's probe finds the feed away, the run gives its match back at once, not at the bound."""
    game = GameScript(
        sr_id=str(uuid.uuid4()), league="mlb", start_after=0.3, event_interval=0.1, event_count=200
    )
    match = make_match("mlb", sr_id=game.sr_id)
    server = sim([game], resume=True, heartbeat_seconds=0.05)
    with FaultProxy(("127.0.0.1", server.port)) as proxy:
        proxy.refuse()
        settings = _lost_at_4_s(listener_settings, proxy.url_via(server.base_url))
        record = MatchListenerRecord.create(match=match)
        ctx = ListenerContext(
            match_id=str(match.id),
            record_id=str(record.id),
            is_test=False,
            settings=settings,
            feed_reachable=lambda: reached,
        )
        out = start_listener(ctx)
        assert out.thread is not None
        out.thread.join(READ_TIMEOUT_SECONDS / 2)
        assert not out.thread.is_alive(), "the run did not give its match back before half the read timeout"
    assert out.code == ExitCode.CONNECTION_ERROR and body_lost_feed(out.listener), out.listener.exit_reason
    if reached:
        assert out.listener.exit_reason.startswith("feed lost for"), out.listener.exit_reason
        assert out.listener.stats.reconnects >= 1
    else:
        assert out.listener.exit_reason.startswith("feed lost before going live"), out.listener.exit_reason
        assert out.listener.stats.reconnects == 0
