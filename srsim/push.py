"""srsim's push stream as an ASGI response: SSE or NDJSON frames over chunked HTTP, heartbeats between.

A stream ends when the client leaves (its close is seen at once, not at the next failed write)
or is cut by ``SimServer.drop_streams()`` / the server stopping: then it raises ``StreamCut``,
and uvicorn closes the connection without the final chunk, so the client sees a broken stream,
not a clean end (``quiet_stream_cuts`` keeps that expected exception out of uvicorn's error log).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING

from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from srsim.sessions import Session, Simulator


class StreamCut(Exception):
    """Raised inside a push stream cut by srsim (a drill or a stop): the connection closes mid-stream."""


class _QuietStreamCuts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], StreamCut))


_QUIET = _QuietStreamCuts()


def quiet_stream_cuts() -> None:
    """Keep srsim's own stream cuts out of uvicorn's "Exception in ASGI application" log (idempotent)."""
    logging.getLogger("uvicorn.error").addFilter(_QUIET)


async def _until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _sse_frame(kind: bytes, data: bytes, event_id: bytes | None = None) -> bytes:
    head = b"event: " + kind + b"\n" + (b"id: " + event_id + b"\n" if event_id is not None else b"")
    return head + b"data: " + data + b"\n\n"


@dataclass(eq=False)
class PushStream:
    """One stream connection of ``session`` from message ``start``; those before ``live`` are replays."""

    sim: Simulator
    session: Session
    _: KW_ONLY
    sse: bool
    start: int
    live: int
    via: str

    def _frame(self, idx: int, sent_at: bytes) -> bytes:
        line = self.session.lines[idx]
        if idx < self.live:  # sent before this connection: a replay, marked so
            line = line[:-1] + b',"replay":true}'
        if sent_at:
            line = line[:-1] + sent_at
        if not self.sse:
            return line + b"\n"
        token = self.sim.resume_token
        return _sse_frame(b"event", line, f"{token}.{idx}".encode() if token else b"%d" % idx)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sim, session = self.sim, self.session
        ctype = b"text/event-stream" if self.sse else b"application/json"
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", ctype + b"; charset=utf-8"),
                    (b"cache-control", b"no-cache"),
                    (b"connection", b"close"),
                ],
            }
        )
        interval = int(sim.heartbeat * 1000)
        hb = json.dumps({"heartbeat": {"interval": interval}}, separators=(",", ":")).encode()
        hb_frame = _sse_frame(b"heartbeat", hb) if self.sse else hb + b"\n"
        client = scope.get("client")
        stream = sim.open_stream(session.game.sr_id, tuple(client[:2]) if client else None, self.via)
        gone = asyncio.ensure_future(_until_disconnect(receive))
        loop = asyncio.get_running_loop()
        # One future per wait, resolved by its timer, the client leaving or a cut: what asyncio.wait
        # did for every frame, without its sets and its callbacks added and removed each time (srsim's
        # CPU per frame at 5,000 streams: 46 -> 36 us, issue 34)
        waiting: asyncio.Future[None] | None = None

        def wake(_: object = None) -> None:
            if waiting is not None and not waiting.done():
                waiting.set_result(None)

        gone.add_done_callback(wake)
        stream.cut.add_done_callback(wake)
        idx, times, origin = self.start, session.times, session.origin
        next_hb = time.monotonic() + sim.heartbeat
        try:
            while not (gone.done() or stream.cut.done()):
                now = time.monotonic()
                due = origin + times[idx] if idx < len(times) else float("inf")
                if due <= now:
                    frames = []
                    sent_at = b',"srsim_sent_at":%.6f}' % time.time() if sim.stamp_sends else b""
                    while idx < len(times) and origin + times[idx] <= now:
                        frames.append(self._frame(idx, sent_at))
                        idx += 1
                    await send({"type": "http.response.body", "body": b"".join(frames), "more_body": True})
                    if idx > self.live:  # the frames held a live event, not only replays
                        stream.record.sent_live(time.monotonic())
                elif next_hb <= now:
                    await send({"type": "http.response.body", "body": hb_frame, "more_body": True})
                    stream.record.sent_live(time.monotonic())
                    next_hb += sim.heartbeat
                else:
                    waiting = loop.create_future()
                    timer = loop.call_later(min(due, next_hb) - now, wake)
                    try:
                        await waiting
                    finally:
                        timer.cancel()
                        waiting = None
            if stream.cut.done():
                raise StreamCut(session.game.sr_id)
            # the client left: nothing more to send
        finally:
            gone.remove_done_callback(wake)
            stream.cut.remove_done_callback(wake)
            gone.cancel()
            sim.close_stream(stream)
