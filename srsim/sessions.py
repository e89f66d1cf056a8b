"""srsim's value types: a game's continuous session, its stream connections, and what routes see.

``Simulator`` is what srsim's routes (``srsim.http``) and push streams (``srsim.push``) read
and call on the running simulator; ``srsim.server.SimServer`` is the one implementation.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from srsim.script import GameScript


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
    first_live: float | None = None  # when live data (a live event or a heartbeat) was first sent on it
    last_live: float | None = None  # when live data was last sent on it (replays are not live data)

    def sent_live(self, at: float) -> None:
        """Live data was handed to the connection at ``at`` (``time.monotonic()``)."""
        if self.first_live is None:
            self.first_live = at
        self.last_live = at

    def as_dict(self) -> dict[str, Any]:
        return {
            "sr_id": self.sr_id,
            "via": self.via,
            "opened": self.opened,
            "closed": self.closed,
            "first_live": self.first_live,
            "last_live": self.last_live,
            "port": self.peer[1] if self.peer else None,
        }


@dataclass(eq=False)
class OpenStream:
    """A stream connection being served: its record and the future ``drop_streams()`` sets to cut it."""

    record: StreamRecord
    cut: asyncio.Future[None]


class Simulator(Protocol):
    """The running simulator as its routes and push streams use it (``srsim.server.SimServer``)."""

    sessions: dict[str, Session]
    stream_history: list[StreamRecord]
    schedule_requests: list[str]
    pbp_faults: list[str]
    pbp_requests: Counter[str]
    players_file: Path | None
    league_file: Path | None
    api_key: str | None
    resume: bool
    heartbeat: float  # real seconds between heartbeats
    stamp_sends: bool  # each event frame carries srsim_sent_at, when it was sent (benchmarks)

    @property
    def resume_token(self) -> str | None: ...

    def resume_from(self, session: Session, resume_id: str) -> int | str: ...

    def open_stream(self, sr_id: str, peer: tuple[str, int] | None, via: str) -> OpenStream: ...

    def close_stream(self, stream: OpenStream) -> None: ...
