"""srsim's server: continuous game sessions served as push streams and a schedule API (uvicorn).

Each game is a session whose clock starts with the server and runs whether or not anyone
listens, so a late or reconnecting listener gets the live position unless it resumes. Routes:

* ``GET /{league}/{access}/stream/en/events/subscribe?match=sd:match:{id}`` - SSE
  (``text/event-stream``) by default; with ``format=ndjson`` a 302 redirect to a stream URL that
  sends newline-delimited JSON over chunked HTTP, like the provider. Heartbeats
  ``{"heartbeat":{"interval":N}}`` every ``heartbeat_seconds`` (script seconds) on both.
  Every event message carries ``"resume_id": "{token}.{index}"`` (token: this server instance;
  index: the message's position in the session), also SSE's ``id:`` line. ``&resume_id=ID`` (or
  SSE's ``Last-Event-ID`` header; the ndjson redirect keeps the parameter) replays from that
  message itself, so the client sees it twice, each replayed message marked ``"replay": true``,
  then goes on live; refused with 410 and
  ``{"message": ...}`` for a malformed, unknown or other-instance id, one sent more than
  ``resume_window_seconds`` ago (real seconds from its scheduled send time) or more than
  ``resume_max_messages`` missed. ``resume=False`` models a feed without resume: no resume ids,
  bare-index ``id:`` lines, the parameter ignored. ``stamp_sends=True`` (benchmarks) adds
  ``"srsim_sent_at"`` to every event frame: the Unix time it was written to the socket, so a
  measurement can start from the send rather than from the script's schedule (a simulator late
  for a core sends late; kickoff records such a per-delivery field with the message, no part
  of its identity).
* ``GET /{league}/{access}[/v7][/en]/games/{id}/pbp.json`` - play-by-play: ``game`` (``id``,
  ``status``, ``scheduled``, ``home``, ``away``) and ``events``, the ``payload.event`` of every
  message sent so far, each once in its final version with deleted ones left out
  (``srsim.pbp.final_events``), plus the message's ``event_category``. The provider's pull feed
  (e.g. MLB's ``/mlb/{access}/v7/en/games/{id}/pbp.json``) nests events by innings and halves;
  srsim's list is flat. ``pbp_faults`` (one consumed per request: ``503``, ``404``, ``notjson``,
  ``noids``) make the next answers fail; ``pbp_requests[sr_id]`` counts the requests.
* ``GET /{league}/{access}/games/{yyyy}/{mm}/{dd}/schedule.json`` - daily schedule (MLB, NHL shape).
* ``GET /{league}/{access}/games/{yyyy}/{REG|PRE|PST}/{week}/schedule.json`` - weekly (NFL shape).
* ``GET /{league}/{access}/games/{yyyy}/{REG|PRE|PST}/schedule.json`` - the league's season.
* ``GET /{league}/{access}/league/{hierarchy|teams|seasons}.json`` - the league's metadata, teams
  and seasons (``srsim.leagues``: from ``league_file``, read anew on every request, else built
  from the served games).
* ``GET /players/{league}`` - the players map (Sleeper's format; of models.leagues.PLAYERS) from
  ``players_file``, read anew on every request so a test or the demo changes injury statuses by
  rewriting the file.
* ``GET /_srsim/sessions`` - every session's position and status (for boards and tests).
* ``GET /_srsim/connections`` - every stream connection served so far (``stream_history``):
  ``sr_id``, ``via``, ``opened`` and ``closed`` (the machine's ``time.monotonic()``, the same clock
  in every process; ``closed`` null while open), ``first_live`` and ``last_live`` (when live data,
  a live event or a heartbeat, was first and last handed to the connection; null before any;
  replayed events are not live data) and ``port`` (the client's port as srsim saw it), oldest first.
  A path may start with ``/_via/{tag}`` (a client's base URL ``http://host:port/_via/{tag}``):
  the tag is recorded as the connection's ``via`` (who connected, through any proxy), and the
  rest of the path is served as usual.

With ``watch_dir`` srsim serves every script file that appears there while it runs (``kickoff sim
clone`` writes one), each new session's clock starting when it is picked up.

The routes are a Starlette app (``srsim.http``; a stream is ``srsim.push.PushStream``) served by
uvicorn on one asyncio loop, so a thousand concurrent streams cost a thousand small coroutines,
not a thousand threads; ``SimServer`` owns the sessions and uvicorn's lifecycle. For is_test
matches the session drives Match.status through a StatusWriter (scheduled → inprogress → delayed
→ inprogress → closed). ``drop_streams()`` cuts open streams mid-stream (no final chunk: the
client sees a broken stream) and ``connections(sr_id)`` counts them (tests, drills);
``stream_history`` keeps every stream connection's peer and when it opened and closed
(``time.monotonic()``), so a test can tell whether two streams of one match ever overlapped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn

from srsim.errors import SimulatorScriptError
from srsim.http import PBP_FAULTS, build_app
from srsim.push import quiet_stream_cuts
from srsim.script import GameScript, load_script
from srsim.sessions import OpenStream, Session, StreamRecord

logger = logging.getLogger(__name__)

__all__ = ["PBP_FAULTS", "OpenStream", "Session", "SimServer", "StreamRecord"]  # the types: srsim.sessions


class _Uvicorn(uvicorn.Server):
    """uvicorn run by SimServer: no signal handlers of its own (SimServer's owner, the CLI or a test,
    says when it stops) and an exit at once on ``exit_now`` rather than at its next 0.1 s tick.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.exit_now = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def main_loop(self) -> None:
        await self.on_tick(0)  # its per-tick work (Date header, request limit) is configured off
        await self.exit_now.wait()


class SimServer:
    """The simulator: sessions plus a Starlette app on uvicorn, run in the caller's or a background thread."""

    def __init__(
        self,
        games: list[GameScript],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        speed: float = 1.0,
        heartbeat_seconds: float = 5.0,
        api_key: str | None = None,
        status_writer: Any = None,
        watch_dir: Path | None = None,
        watch_seconds: float = 1.0,
        players_file: Path | None = None,
        league_file: Path | None = None,
        resume: bool = True,
        resume_window_seconds: float = 600.0,
        resume_max_messages: int = 5000,
        stamp_sends: bool = False,
    ) -> None:
        self.stamp_sends = stamp_sends
        self.resume = resume
        self.resume_window_seconds = resume_window_seconds
        self.resume_max_messages = resume_max_messages
        self.token = secrets.token_hex(8)  # this instance's part of every resume id
        self.players_file = players_file
        self.league_file = league_file
        self.host = host
        self.port = port
        self.speed = speed
        self.heartbeat = heartbeat_seconds / speed
        self.api_key = api_key
        self.status_writer = status_writer
        self.origin = time.monotonic()
        self.wall_origin = datetime.now(UTC)
        self.sessions = {
            g.sr_id: Session.build(
                g, origin=self.origin, speed=speed, wall_origin=self.wall_origin, token=self.resume_token
            )
            for g in games
        }
        self.watch_dir = watch_dir
        self.watch_seconds = watch_seconds
        self._seen_scripts: set[Path] = set()
        self._drivers: list[asyncio.Task[None]] = []
        self._streams: dict[str, set[OpenStream]] = {}  # open stream connections by sr_id
        self.stream_history: list[StreamRecord] = []  # every stream connection, in the order opened
        self.schedule_requests: list[str] = []  # paths of schedule and league requests served (tests)
        self.pbp_faults: list[str] = []  # one consumed per pbp request (PBP_FAULTS); empty: normal
        self.pbp_requests: Counter[str] = Counter()  # pbp requests served by sr_id (faults included)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def resume_token(self) -> str | None:
        return self.token if self.resume else None

    # -- open streams (any thread) -----------------------------------------------------

    @property
    def streams_open(self) -> int:
        """Stream connections open now, every match."""
        return sum(len(conns) for conns in list(self._streams.values()))

    def connections(self, sr_id: str) -> int:
        """Stream connections of match ``sr_id`` open now."""
        return len(self._streams.get(sr_id, ()))

    def drop_streams(self, sr_id: str | None = None) -> int:
        """Cut every open stream connection (of ``sr_id``, or all) without a final chunk; returns how many.

        Safe from any thread: the transports are aborted on the server's loop, and the connections
        no longer count once this returns.
        """
        loop = self._loop
        if loop is None or not loop.is_running():
            return 0

        def drop() -> int:
            dropped = 0
            for key, conns in list(self._streams.items()):
                if sr_id is not None and key != sr_id:
                    continue
                for stream in list(conns):
                    if not stream.cut.done():
                        stream.cut.set_result(None)
                    conns.discard(stream)
                    dropped += 1
                if dropped:
                    logger.info("srsim: dropped the stream connections of %s", key)
            return dropped

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            return drop()

        async def in_loop() -> int:
            return drop()

        return asyncio.run_coroutine_threadsafe(in_loop(), loop).result(10)

    # -- running ---------------------------------------------------------------------

    def open_stream(self, sr_id: str, peer: tuple[str, int] | None, via: str) -> OpenStream:
        """Count and log a stream connection of ``sr_id`` from now (loop thread)."""
        assert self._loop is not None
        stream = OpenStream(StreamRecord(sr_id, peer, time.monotonic(), via=via), self._loop.create_future())
        self._streams.setdefault(sr_id, set()).add(stream)
        self.stream_history.append(stream.record)
        return stream

    def close_stream(self, stream: OpenStream) -> None:
        """The stream connection ended (its client left, or it was cut): uncounted, its close logged."""
        self._streams.get(stream.record.sr_id, set()).discard(stream)
        stream.record.closed = time.monotonic()

    # -- running ---------------------------------------------------------------------

    async def serve(self) -> None:
        """Serve until ``stop()``: uvicorn on a socket bound here (so ``port=0`` is known at once)."""
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.create_server((self.host, self.port), family=family, backlog=4096)
        self.port = sock.getsockname()[1]
        quiet_stream_cuts()
        config = uvicorn.Config(
            build_app(self),
            log_config=None,
            access_log=False,
            lifespan="off",
            proxy_headers=False,  # a stream's peer is its socket's (tests tell hosts apart by it)
            backlog=4096,
            server_header=False,
            date_header=False,
            timeout_graceful_shutdown=2,
        )
        web = _Uvicorn(config)
        web_task = asyncio.create_task(web.serve(sockets=[sock]))
        try:
            while not web.started:  # uvicorn's startup: the app loaded, the socket accepting
                if web_task.done():
                    await web_task
                    raise RuntimeError("srsim: uvicorn ended before it started")
                await asyncio.sleep(0.005)
            # Session clocks start now that the server listens (building long scripts takes time).
            self.origin = time.monotonic()
            for session in self.sessions.values():
                session.origin = self.origin
            for session in self.sessions.values():
                self._start_session(session)
            if self.watch_dir is not None:
                # Scripts already there are the past (serve them with --script); new ones are served.
                self._seen_scripts = set(self._scripts_in(self.watch_dir))
                self._drivers.append(asyncio.create_task(self._watch(self.watch_dir)))
            logger.info(
                "srsim serving %d sessions on %s (speed %.1fx)", len(self.sessions), self.base_url, self.speed
            )
            self._ready.set()
            await self._stopping.wait()
        finally:
            for d in self._drivers:
                d.cancel()
            self.drop_streams()  # open streams end mid-stream, as when the process dies
            web.should_exit = True
            web.exit_now.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(web_task, 5.0)
            sock.close()

    def start_background(self) -> SimServer:
        """Run the server in a daemon thread (tests, benchmarks, the demo); returns once listening."""
        self._thread = threading.Thread(target=lambda: asyncio.run(self.serve()), name="srsim", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("srsim did not start")
        return self

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def stop_soon(self) -> None:
        """Ask the server to stop (from the loop's thread, e.g. a signal handler)."""
        if self._stopping is not None:
            self._stopping.set()

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            self._thread.join(5)

    # -- sessions added while serving ----------------------------------------------------

    def _start_session(self, session: Session) -> None:
        """Drive an is_test session's status and make its clone dispatchable (loop thread)."""
        if not session.game.is_test:
            return
        self._drivers.append(asyncio.create_task(self._drive(session)))
        if self.status_writer is not None:
            self.status_writer.mark_served(session.game.sr_id, session.scheduled)

    def add_games(self, games: list[GameScript]) -> list[str]:
        """Serve more games from now on (loop thread); returns the sr_ids added (known ones are kept).

        Each new session's clock starts now, as if srsim had just started with it.
        """
        added = []
        for game in games:
            if game.sr_id in self.sessions:
                continue
            session = Session.build(
                game,
                origin=time.monotonic(),
                speed=self.speed,
                wall_origin=datetime.now(UTC),
                token=self.resume_token,
            )
            self.sessions[game.sr_id] = session
            self._start_session(session)
            added.append(game.sr_id)
        return added

    @staticmethod
    def _scripts_in(directory: Path) -> list[Path]:
        try:
            return sorted(p for p in directory.glob("*.json") if p.is_file())
        except OSError:
            return []

    async def _watch(self, directory: Path) -> None:
        """Serve every script file that appears in ``directory`` (``kickoff sim clone`` writes there)."""
        while True:
            await asyncio.sleep(self.watch_seconds)
            for path in self._scripts_in(directory):
                if path in self._seen_scripts:
                    continue
                self._seen_scripts.add(path)
                try:
                    games = await asyncio.to_thread(load_script, path)
                except SimulatorScriptError as exc:
                    logger.warning("srsim: script %s not served: %s", path, exc)
                    continue
                added = self.add_games(games)
                logger.info("srsim: serving %d new sessions from %s: %s", len(added), path, ", ".join(added))

    # -- is_test status --------------------------------------------------------------

    async def _drive(self, session: Session) -> None:
        for when, status in session.game.transitions():
            delay = session.origin + when / self.speed - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.status_writer is not None:
                self.status_writer.write(session.game.sr_id, status)

    # -- resume -----------------------------------------------------------------------

    def resume_from(self, session: Session, resume_id: str) -> int | str:
        """The message index a stream resumed from ``resume_id`` starts at, or why it is refused."""
        token, sep, index = resume_id.rpartition(".")
        if not sep or not token or not index.isdigit() or len(resume_id) > 200:
            return f"malformed resume id {resume_id[:80]!r} (expected TOKEN.INDEX)"
        if token != self.token:
            return "unknown resume id: not from this srsim instance"
        idx, pos = int(index), session.position()
        if idx >= pos:
            return f"unknown resume id: message {idx} of this match has not been sent"
        age = time.monotonic() - (session.origin + session.times[idx])
        if age > self.resume_window_seconds:
            window = self.resume_window_seconds
            return f"resume window passed: message {idx} was sent {age:.0f} s ago (window {window:g} s)"
        missed = pos - idx - 1
        if missed > self.resume_max_messages:
            return (
                f"too many messages missed: {missed} since message {idx} (at most {self.resume_max_messages})"
            )
        return idx
