"""Listener fixtures: srsim in process, a raw feed server for malformed streams, short-interval settings."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from config.settings import MatchListenerEnvironment
from listener.body import ListenerContext
from listener.match_listener import MatchListener
from srsim.script import GameScript
from srsim.server import SimServer
from srsim.status import StatusWriter
from tests import intervals

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def sim(db: str) -> Iterator[Callable[..., SimServer]]:
    """Start srsim in this process (background thread) with the given games; stopped after the test."""
    started: list[tuple[SimServer, StatusWriter | None]] = []

    def start(games: list[GameScript], *, speed: float = 1.0, heartbeat_seconds: float = 0.05, **kw: Any):
        writer = StatusWriter() if kw.pop("write_status", True) else None
        server = SimServer(
            games, speed=speed, heartbeat_seconds=heartbeat_seconds, status_writer=writer, **kw
        )
        server.start_background()
        started.append((server, writer))
        return server

    yield start
    for server, writer in started:
        server.stop()
        if writer is not None:
            writer.close()


@pytest.fixture
def listener_settings(
    settings: MatchListenerEnvironment, tmp_path: Path
) -> Callable[..., MatchListenerEnvironment]:
    """This run's settings with short stream intervals and a private DATA_DIR; keywords override."""

    def make(**overrides: Any) -> MatchListenerEnvironment:
        values: dict[str, Any] = {
            "data_dir": tmp_path / "data",
            "listener_max_consecutive_heartbeats": 40,
            "listener_status_reload_heartbeats": 4,
            "listener_reconnect_attempts": 2,
            **intervals.fields("stream"),
        }
        values.update(overrides)
        return settings.model_copy(update=values)

    return make


@dataclass
class Outcome:
    """What a listener run in a test thread returned."""

    code: int | None = None
    listener: MatchListener = field(default_factory=MatchListener)
    thread: threading.Thread | None = None


def run_listener(
    ctx: ListenerContext, *, timeout: float = 30.0, listener: MatchListener | None = None
) -> Outcome:
    """Run a MatchListener for ``ctx`` in a thread and wait at most ``timeout`` seconds."""
    out = start_listener(ctx, listener=listener)
    assert out.thread is not None
    out.thread.join(timeout)
    assert not out.thread.is_alive(), f"listener still running after {timeout}s"
    return out


def start_listener(ctx: ListenerContext, *, listener: MatchListener | None = None) -> Outcome:
    out = Outcome(listener=listener or MatchListener())

    def target() -> None:
        out.code = out.listener.run(ctx)

    out.thread = threading.Thread(target=target, daemon=True)
    out.thread.start()
    return out


class RawFeedHandler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.body`` (bytes) as NDJSON over chunked HTTP, optionally behind a redirect.

    ``server.truncate``: stop mid-chunk and close (a truncated chunk). ``server.status``: HTTP status.
    ``server.redirect_to``: the redirect's origin (empty: a relative Location, this same server).
    """

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        srv: Any = self.server
        if self.path.endswith("/pbp.json"):  # a backfill's play-by-play: this feed has none
            srv.pbp_requests.append(self.path)
            body = b'{"message":"no play-by-play here"}'
            self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        srv.requests.append((self.path, dict(self.headers)))
        if srv.redirect and not self.path.startswith("/stream-host/"):
            self.send_response(302)
            self.send_header("Location", f"{srv.redirect_to}/stream-host/abc?session=opaque")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if srv.status != 200:
            body = b'{"message":"Invalid Authentication"}'
            self.send_response(srv.status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", srv.content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        data = srv.body
        step = 65536
        for i in range(0, len(data), step):
            piece = data[i : i + step]
            self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
        if srv.truncate:
            self.wfile.write(b'400\r\n{"payload":{"game"')  # announced 1024 bytes, sent 20, then close
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True


@pytest.fixture
def raw_feed() -> Iterator[Callable[..., Any]]:
    """Start a raw feed server: ``raw_feed(body, redirect=True, truncate=False, status=200)``.

    Also ``content_type`` and ``redirect_to`` (another server's origin to redirect to).
    """
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(
        body: bytes,
        *,
        redirect: bool = True,
        truncate: bool = False,
        status: int = 200,
        content_type: str = "application/json",
        redirect_to: str = "",
    ) -> http.server.ThreadingHTTPServer:
        srv: Any = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RawFeedHandler)
        srv.daemon_threads = True
        srv.body, srv.redirect, srv.truncate, srv.status = body, redirect, truncate, status
        srv.content_type, srv.redirect_to = content_type, redirect_to
        srv.requests = []
        srv.pbp_requests = []
        srv.base_url = f"http://127.0.0.1:{srv.server_address[1]}"
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def recorded(where: Any) -> list[Any]:
    """What a run recorded: a listener's (its event log, or its file in a run without a row), an
    archive's or a file's messages."""
    from listener.archive import EventArchive, read_events
    from listener.event_log import EventLog
    from listener.match_listener import MatchListener
    from models.event_log import messages_of

    if isinstance(where, MatchListener):
        where = where.archive
    if isinstance(where, EventLog):
        return messages_of(where.match_id)
    if isinstance(where, EventArchive):
        return read_events(where.path)
    return read_events(where)
