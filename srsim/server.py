"""srsim's HTTP server: continuous game sessions served as push streams and a schedule API (asyncio).

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
  bare-index ``id:`` lines, the parameter ignored.
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
* ``GET /players/nfl`` - the players map (Sleeper's format) from ``players_file``, read anew on
  every request so a test or the demo changes injury statuses by rewriting the file.
* ``GET /_srsim/sessions`` - every session's position and status (for boards and tests).
* ``GET /_srsim/connections`` - every stream connection served so far (``stream_history``):
  ``sr_id``, ``via``, ``opened`` and ``closed`` (the machine's ``time.monotonic()``, the same clock
  in every process; ``closed`` null while open), oldest first.
  A path may start with ``/_via/{tag}`` (a client's base URL ``http://host:port/_via/{tag}``):
  the tag is recorded as the connection's ``via`` (who connected, through any proxy), and the
  rest of the path is served as usual.

With ``watch_dir`` srsim serves every script file that appears there while it runs (``kickoff sim
clone`` writes one), each new session's clock starting when it is picked up.

One asyncio loop serves every connection, so a thousand concurrent streams cost a thousand small
coroutines, not a thousand threads. For is_test matches the session drives Match.status through
a StatusWriter (scheduled → inprogress → delayed → inprogress → closed). ``drop_streams()``
cuts open streams abruptly and ``connections(sr_id)`` counts them (tests, drills);
``stream_history`` keeps every stream connection's peer and when it opened and closed
(``time.monotonic()``), so a test can tell whether two streams of one match ever overlapped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from config.errors import SimulatorScriptError
from srsim import leagues
from srsim.pbp import final_events
from srsim.script import GameScript, load_script

logger = logging.getLogger(__name__)

_STREAM = re.compile(
    r"^/(?P<league>[a-z0-9_-]+)/(?P<access>[a-z0-9_-]+)/stream/(?:[a-z]+/)?events/subscribe$"
)
_PUSH = re.compile(r"^/_push/(?P<sr_id>[A-Za-z0-9_.:-]+)$")
_VIA = re.compile(r"^/_via/(?P<via>[A-Za-z0-9_.-]{1,64})(?P<rest>/.*)$")
_DAILY = re.compile(
    r"^/(?P<league>[a-z0-9_-]+)/[a-z0-9_-]+/(?:[a-z]+/)?games/(\d{4})/(\d{2})/(\d{2})/schedule\.json$"
)
_WEEKLY = re.compile(
    r"^/(?P<league>[a-z0-9_-]+)/[a-z0-9_-]+/(?:[a-z]+/)?games/(\d{4})/([A-Z]{3})/(\d+)/schedule\.json$"
)
_SEASON = re.compile(
    r"^/(?P<league>[a-z0-9_-]+)/[a-z0-9_-]+/(?:[a-z]+/)?games/(\d{4})/([A-Z]{3})/schedule\.json$"
)
_LEAGUE = re.compile(
    r"^/(?P<league>[a-z0-9_-]+)/[a-z0-9_-]+/(?:[a-z]+/)?league/(?P<doc>hierarchy|teams|seasons)\.json$"
)
_PBP = re.compile(
    r"^/(?P<league>[a-z0-9_-]+)/[a-z0-9_-]+/(?:v\d+/)?(?:[a-z]{2}/)?games/(?P<sr_id>[A-Za-z0-9_.:-]+)/pbp\.json$"
)
#: The fault kinds of ``SimServer.pbp_faults``.
PBP_FAULTS = ("503", "404", "notjson", "noids")


@dataclass
class Session:
    """One game's continuous session: its script, messages and clock origin."""

    game: GameScript
    origin: float  # monotonic second of script time 0
    speed: float
    scheduled: datetime
    times: list[float] = field(default_factory=list)  # real seconds after origin
    lines: list[bytes] = field(default_factory=list)  # one JSON text per message

    @classmethod
    def build(
        cls,
        game: GameScript,
        *,
        origin: float,
        speed: float,
        wall_origin: datetime,
        token: str | None = None,
    ) -> Session:
        """The session of ``game``; with ``token`` each message carries its resume id ``token.index``."""
        scheduled = wall_origin + timedelta(seconds=game.start_after / speed)
        s = cls(game=game, origin=origin, speed=speed, scheduled=scheduled)
        s.times = [t / speed for t in game.event_times()]
        envelopes = game.envelopes(scheduled)
        if token is not None:
            envelopes = [{**e, "resume_id": f"{token}.{i}"} for i, e in enumerate(envelopes)]
        s.lines = [json.dumps(e, separators=(",", ":")).encode() for e in envelopes]
        return s

    def elapsed(self) -> float:
        return time.monotonic() - self.origin

    def position(self) -> int:
        """Index of the next event that has not happened yet."""
        now = self.elapsed()
        lo, hi = 0, len(self.times)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.times[mid] <= now:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def status(self) -> str:
        return self.game.status_at(self.elapsed() * self.speed)

    def describe(self) -> dict[str, Any]:
        return {
            "sr_id": self.game.sr_id,
            "league": self.game.league,
            "title": self.game.title,
            "is_test": self.game.is_test,
            "status": self.status(),
            "position": self.position(),
            "events": len(self.lines),
            "scheduled": self.scheduled.isoformat(),
        }


@dataclass
class StreamRecord:
    """One stream connection of a match: its peer address and ``time.monotonic()`` times."""

    sr_id: str
    peer: tuple[str, int] | None  # the client's (host, port): a fault proxy's upstream socket in tests
    opened: float
    closed: float | None = None  # None while it is open
    via: str = ""  # the client's tag: the ``/_via/{tag}`` its request path started with

    def as_dict(self) -> dict[str, Any]:
        return {"sr_id": self.sr_id, "via": self.via, "opened": self.opened, "closed": self.closed}


class SimServer:
    """The simulator: sessions plus an asyncio HTTP server, run in the caller's or a background thread."""

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
    ) -> None:
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
                g, origin=self.origin, speed=speed, wall_origin=self.wall_origin, token=self._resume_token
            )
            for g in games
        }
        self.watch_dir = watch_dir
        self.watch_seconds = watch_seconds
        self._seen_scripts: set[Path] = set()
        self._drivers: list[asyncio.Task[None]] = []
        self._streams: dict[str, set[asyncio.StreamWriter]] = {}  # open stream connections by sr_id
        self.stream_history: list[StreamRecord] = []  # every stream connection, in the order opened
        self.schedule_requests: list[str] = []  # paths of schedule and league requests served (tests)
        self.pbp_faults: list[str] = []  # one consumed per pbp request (PBP_FAULTS); empty: normal
        self.pbp_requests: Counter[str] = Counter()  # pbp requests served by sr_id (faults included)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def _resume_token(self) -> str | None:
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
                for writer in list(conns):
                    writer.transport.abort()
                    conns.discard(writer)
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

    async def serve(self) -> None:
        """Serve until ``stop()``."""
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._server = await asyncio.start_server(
            self._handle, self.host, self.port, backlog=4096, limit=65536
        )
        self.port = self._server.sockets[0].getsockname()[1]
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
        try:
            await self._stopping.wait()
        finally:
            for d in self._drivers:
                d.cancel()
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

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
                token=self._resume_token,
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

    # -- HTTP --------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, target, _ = request_line.split(" ", 2)
            headers = {}
            for h in header_lines:
                if ":" in h:
                    k, v = h.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            await self._route(method, target, headers, reader, writer)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            pass
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _route(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        parts = urlsplit(target)
        path, query = parts.path, parse_qs(parts.query)
        via = ""
        if v := _VIA.match(path):
            via, path = v["via"], v["rest"]
        if method != "GET":
            return await _respond(writer, 405, {"message": "method not allowed"})
        if path == "/_srsim/sessions":
            return await _respond(writer, 200, {"sessions": [s.describe() for s in self.sessions.values()]})
        if path == "/_srsim/connections":
            return await _respond(writer, 200, {"connections": [r.as_dict() for r in self.stream_history]})
        if self.api_key is not None and headers.get("x-api-key") != self.api_key:
            return await _respond(writer, 401, {"message": "Invalid Authentication"})
        if m := _STREAM.match(path):
            sr_id = (query.get("match", [""])[0]).removeprefix("sd:match:")
            session = self.sessions.get(sr_id)
            if session is None or session.game.league != m["league"]:
                return await _respond(writer, 404, {"message": f"no such match {sr_id}"})
            resume_id = query.get("resume_id", [""])[0]
            if query.get("format", [""])[0] == "ndjson":
                location = (
                    (f"/_via/{via}" if via else "")
                    + f"/_push/{sr_id}"
                    + (f"?resume_id={quote(resume_id, safe='')}" if resume_id else "")
                )
                writer.write(
                    f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n"
                    "Connection: close\r\n\r\n".encode()
                )
                return await writer.drain()
            return await self._stream(
                session,
                reader,
                writer,
                sse=True,
                resume_id=resume_id or headers.get("last-event-id", ""),
                via=via,
            )
        if m := _PUSH.match(path):
            session = self.sessions.get(m["sr_id"])
            if session is None:
                return await _respond(writer, 404, {"message": "no such stream"})
            resume_id = query.get("resume_id", [""])[0]
            return await self._stream(session, reader, writer, sse=False, resume_id=resume_id, via=via)
        if m := _PBP.match(path):
            return await self._pbp(m["league"], m["sr_id"], writer)
        if path == "/players/nfl":
            return await self._players(writer)
        if m := _LEAGUE.match(path):
            self.schedule_requests.append(path)
            return await self._league(m["league"], m["doc"], writer)
        for pattern, kind in ((_DAILY, "daily"), (_WEEKLY, "weekly"), (_SEASON, "season")):
            if m := pattern.match(path):
                self.schedule_requests.append(path)
                return await _respond(writer, 200, self._schedule(kind, m))
        return await _respond(writer, 404, {"message": "not found"})

    async def _players(self, writer: asyncio.StreamWriter) -> None:
        """The players map file as it is now; 404 without one."""
        if self.players_file is None or not self.players_file.exists():
            return await _respond(writer, 404, {"message": "no players map (sim serve --players FILE)"})
        try:
            data = json.loads(self.players_file.read_text())
        except ValueError:
            return await _respond(writer, 500, {"message": "the players map file is not JSON"})
        return await _respond(writer, 200, data)

    async def _league(self, league: str, doc: str, writer: asyncio.StreamWriter) -> None:
        """One league document; 404 for a league neither the league file nor a game names."""
        try:
            data = (await asyncio.to_thread(leagues.read_league_file, self.league_file)).get(league)
        except SimulatorScriptError as exc:
            return await _respond(writer, 500, {"message": str(exc)})
        if data is None:
            games = [s.game for s in self.sessions.values() if s.game.league == league]
            if not games:
                return await _respond(writer, 404, {"message": f"no such league {league}"})
            data = leagues.default_league(league, games, today=datetime.now(UTC).date())
        if doc == "hierarchy":
            return await _respond(writer, 200, leagues.hierarchy_document(league, data))
        if doc == "teams":
            return await _respond(writer, 200, leagues.teams_document(league, data))
        return await _respond(writer, 200, leagues.seasons_document(data))

    def _resume_from(self, session: Session, resume_id: str) -> int | str:
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

    async def _stream(
        self,
        session: Session,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        sse: bool,
        resume_id: str = "",
        via: str = "",
    ) -> None:
        sr_id = session.game.sr_id
        idx = replay_until = session.position()
        if self.resume and resume_id:
            start = self._resume_from(session, resume_id)
            if isinstance(start, str):
                logger.info("srsim: resume of %s refused: %s", sr_id, start)
                return await _respond(writer, 410, {"message": start})
            logger.info("srsim: %s resumes at message %d (live at %d)", sr_id, start, idx)
            idx = start
        ctype = "text/event-stream" if sse else "application/json"
        writer.write(
            f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}; charset=utf-8\r\nTransfer-Encoding: chunked\r\n"
            "Cache-Control: no-cache\r\nConnection: close\r\n\r\n".encode()
        )
        hb = json.dumps(
            {"heartbeat": {"interval": int(self.heartbeat * 1000)}}, separators=(",", ":")
        ).encode()
        hb_frame = _chunk(b"event: heartbeat\ndata: " + hb + b"\n\n" if sse else hb + b"\n")
        token = self._resume_token
        next_hb = time.monotonic() + self.heartbeat
        conns = self._streams.setdefault(sr_id, set())
        conns.add(writer)
        peer = writer.get_extra_info("peername")
        record = StreamRecord(sr_id, tuple(peer[:2]) if peer else None, time.monotonic(), via=via)
        self.stream_history.append(record)
        # The client closing its side ends the stream at once (not at the next failed write).
        gone: asyncio.Future[bytes] = asyncio.ensure_future(reader.read(1))
        assert self._stopping is not None
        try:
            await writer.drain()
            while not self._stopping.is_set() and not writer.is_closing() and writer in conns:
                now = time.monotonic()
                due = session.origin + session.times[idx] if idx < len(session.times) else float("inf")
                if due <= now:
                    frames = []
                    while idx < len(session.times) and session.origin + session.times[idx] <= now:
                        line = session.lines[idx]
                        if idx < replay_until:  # sent before this connection: a replay, marked so
                            line = line[:-1] + b',"replay":true}'
                        if sse:
                            event_id = f"{token}.{idx}".encode() if token else b"%d" % idx
                            frames.append(
                                _chunk(b"event: event\nid: " + event_id + b"\ndata: " + line + b"\n\n")
                            )
                        else:
                            frames.append(_chunk(line + b"\n"))
                        idx += 1
                    writer.write(b"".join(frames))
                    await writer.drain()
                    continue
                if next_hb <= now:
                    writer.write(hb_frame)
                    await writer.drain()
                    next_hb += self.heartbeat
                    continue
                await asyncio.wait({gone}, timeout=min(due, next_hb) - now)
                if gone.done():
                    if gone.cancelled() or gone.exception() is not None or not gone.result():
                        break
                    gone = asyncio.ensure_future(reader.read(1))  # stray bytes after the request
        finally:
            gone.cancel()
            if gone.done() and not gone.cancelled():
                gone.exception()  # retrieved: a reset connection is no error worth a warning
            conns.discard(writer)
            record.closed = time.monotonic()

    async def _pbp(self, league: str, sr_id: str, writer: asyncio.StreamWriter) -> None:
        """The match's play-by-play so far (final versions, deletes left out), or the next fault."""
        session = self.sessions.get(sr_id)
        if session is None or session.game.league != league:
            return await _respond(writer, 404, {"message": f"no such match {sr_id}"})
        self.pbp_requests[sr_id] += 1
        try:
            fault = self.pbp_faults.pop(0)
        except IndexError:
            fault = None
        if fault is not None:
            logger.info("srsim: play-by-play of %s answers fault %s", sr_id, fault)
        if fault == "503":
            return await _respond(writer, 503, {"message": "fault: service unavailable"})
        if fault == "404":
            return await _respond(writer, 404, {"message": f"fault: no such match {sr_id}"})
        if fault == "notjson":
            return await _respond_raw(writer, 200, b"<html><body>upstream error</body></html>")
        if fault not in (None, "noids"):
            return await _respond(
                writer, 500, {"message": f"unknown pbp fault {fault!r} (one of {PBP_FAULTS})"}
            )
        messages = [json.loads(line) for line in session.lines[: session.position()]]
        events = final_events(messages)
        if fault == "noids":
            events = [{k: v for k, v in e.items() if k != "id"} for e in events]
        return await _respond(writer, 200, {"game": _pbp_game(session, messages), "events": events})

    def _schedule(self, kind: str, m: re.Match[str]) -> dict[str, Any]:
        league = m["league"]
        games = [s for s in self.sessions.values() if s.game.league == league]
        if kind == "daily":
            day = f"{m[2]}-{m[3]}-{m[4]}"
            games = [s for s in games if s.scheduled.date().isoformat() == day]
            return {
                "date": day,
                "league": {"name": league.upper(), "alias": league.upper()},
                "games": [_schedule_game(s) for s in games],
            }
        if kind == "weekly":
            week = int(m[4])
            games = [s for s in games if s.game.week == week]
            return {
                "year": int(m[2]),
                "type": m[3],
                "name": m[3],
                "week": {"sequence": week, "title": str(week), "games": [_schedule_game(s) for s in games]},
            }
        weeks: dict[int, list[dict[str, Any]]] = {}
        for s in games:
            weeks.setdefault(s.game.week, []).append(_schedule_game(s))
        return {
            "year": int(m[2]),
            "type": m[3],
            "name": m[3],
            "weeks": [{"sequence": w, "title": str(w), "games": g} for w, g in sorted(weeks.items())],
        }


def _schedule_game(s: Session) -> dict[str, Any]:
    (hn, hm, ha), (an, am, aa) = s.game.home, s.game.away
    return {
        "id": s.game.sr_id,
        "status": s.status(),
        "title": s.game.title,
        "coverage": "full",
        "scheduled": s.scheduled.isoformat(),
        "home": {"name": f"{hm} {hn}", "alias": ha},
        "away": {"name": f"{am} {an}", "alias": aa},
    }


def _pbp_game(s: Session, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The play-by-play's game: the session's status, teams as in the last push payload sent."""
    last = messages[-1].get("payload", {}).get("game", {}) if messages else {}
    home, away = s.game.teams()
    return {
        "id": s.game.sr_id,
        "status": s.status(),
        "scheduled": s.scheduled.isoformat(),
        "home": last.get("home", home),
        "away": last.get("away", away),
    }


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


async def _respond(writer: asyncio.StreamWriter, status: int, body: dict[str, Any]) -> None:
    await _respond_raw(writer, status, json.dumps(body).encode())


async def _respond_raw(writer: asyncio.StreamWriter, status: int, data: bytes) -> None:
    reason = {
        200: "OK",
        401: "Unauthorized",
        404: "Not Found",
        405: "Method Not Allowed",
        410: "Gone",
        503: "Service Unavailable",
    }.get(status, "Error")
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + data
    )
    await writer.drain()
