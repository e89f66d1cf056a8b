"""bench/api_latency.py's board viewer: a viewer whose stream dies is dead (it fails the bench),
not a viewer that stopped costing anything."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from bench._board_load import Viewer, published
from harness.ports import free_port


class _Board(http.server.BaseHTTPRequestHandler):
    """A board stream that sends one frame, then (``cut``) ends, or (else) answers 401."""

    cut = True

    def do_GET(self) -> None:
        if not self.cut:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b"event: board\ndata: {}\n\n")
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def board() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _Board)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_viewer_whose_stream_ends_is_dead(board: str) -> None:
    viewer = Viewer(board, cookie="session=x")
    viewer.thread.start()
    viewer.thread.join(30)
    assert viewer.bytes > 0
    assert viewer.died == "the stream ended"


def test_a_viewer_refused_its_stream_is_dead(board: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Board, "cut", False)
    viewer = Viewer(board, cookie="session=x")
    viewer.thread.start()
    viewer.thread.join(30)
    assert viewer.died is not None and viewer.died.startswith("HTTP 401")


@pytest.mark.parametrize(
    ("status", "body", "counts"),
    [
        (202, b'{"status": "queued", "published": true}', True),
        (202, b'{"status": "pending", "published": false}', False),
        (200, b'{"status": "duplicate", "published": false}', False),
        (503, b'{"detail": "unavailable"}', False),
        (202, b"not json", False),
    ],
)
def test_only_a_trigger_answered_queued_and_published_counts(status: int, body: bytes, counts: bool) -> None:
    assert published(status, body) is counts
