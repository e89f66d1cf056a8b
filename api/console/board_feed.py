"""One live board per filter for every viewer: computed once per refresh interval, fanned out to every stream.

A ``BoardHub`` per API process keeps a ``BoardFeed`` for each distinct filter that has open
streams, of either board: the listener board (a BoardFilter) or the Matches board (a
MatchesQuery); a ``LiveView`` per kind says how its rows are read and rendered. A feed's task
reads the board (and checks every viewer's session, in one transaction)
in a worker thread once per CONSOLE_BOARD_REFRESH_SECONDS (through its cache: only what
changed since the last reading), renders the rows there (once for read sessions, once for
operator sessions, only the rows that changed) and hands the same frame to
every stream of that filter; a stream only writes what it is given. The feed ends with its last
viewer. The hub caps streams per session (CONSOLE_STREAMS_PER_SESSION) and per process
(CONSOLE_STREAMS_PER_PROCESS): one more is StreamLimitReached (429).

The rows a stream sends carry no session's CSRF token (the page's script sends it with every
action), so every session of one kind gets the very same text.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool

from api.console.board_view import BoardRow
from api.console.sessions import Session, SessionPolicy, sessions_for
from api.errors import StreamLimitReached
from config.errors import KickoffError
from models.boundary import transaction
from models.db import release_connection

if TYPE_CHECKING:
    from jinja2 import Template
    from prometheus_client import Counter as PromCounter
    from prometheus_client import Gauge

    from config.settings import KickoffSettings
    from models.coordination import CoordinationStore

logger = logging.getLogger(__name__)


def sse(event: str, data: str, *, event_id: int | None = None) -> str:
    """One server-sent event (``id:`` is the feed's frame number when given)."""
    lines = "".join(f"data: {line}\n" for line in data.splitlines() or [""])
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\n{lines}\n"


@dataclass(frozen=True)
class Frame:
    """One reading of a filter's board: its number, each session's state, the rows' events or a problem."""

    seq: int
    #: cookie token -> the live session, or None when it ended (tokens checked by this reading)
    sessions: dict[str, Session | None]
    #: can_act -> (version of the rows' text, its ``board`` event (every row) when some stream needs it,
    #: its ``rows`` event from the version before); encoded once for every stream
    events: dict[bool, tuple[int, bytes | None, bytes | None]]
    problem: str | None = None


@dataclass(eq=False)
class Viewer:
    """One open stream: its session token, its session as last checked, the rows version it has."""

    token: str
    session: Session
    sent_version: int = 0
    seen_seq: int = 0


@dataclass(eq=False)
class _Rendered:
    """The rows' text for one kind of session (read or operator), row by row, and the events to send.

    ``version`` goes up when the text changed; ``delta`` (event ``rows``: the rows whose text
    changed, in place) takes a stream from the version before to this one, ``full`` (event
    ``board``: every row) any stream to this one. A row that did not change is not rendered again.
    """

    can_act: bool
    version: int = 0
    order: list[str] = field(default_factory=list)  # match ids, in the board's order
    by_id: dict[str, str] = field(default_factory=dict)  # match id -> the row's text
    known: dict[str, tuple[BoardRow, str]] = field(default_factory=dict)  # match id -> last row, its text
    rows: list[BoardRow] | None = None  # the reading rendered last
    count: int = 0
    delta: bytes | None = None
    full: bytes | None = None

    def update(self, rows: list[BoardRow], count: int, template: Template, here: str) -> None:
        kind = _Kind(self.can_act)
        known: dict[str, tuple[BoardRow, str]] = {}
        by_id: dict[str, str] = {}
        for row in rows:
            mid = row.entry.match_id
            last = self.known.get(mid)
            # the same row object (kept by the reading's cache) or an equal one: its text as it was
            if last is not None and (last[0] is row or last[0] == row):
                text = last[1]
            else:
                text = template.render(rows=[row], session=kind, csrf_token="", here=here).strip()
            known[mid] = (row, text)
            by_id[mid] = text
        order = [row.entry.match_id for row in rows]
        self.known, self.rows = known, rows
        if self.version and order == self.order and count == self.count:
            changed = [[mid, by_id[mid]] for mid in order if by_id[mid] != self.by_id.get(mid)]
            if not changed:
                return
            self.delta = sse("rows", json.dumps({"rows": changed, "count": count})).encode()
        else:
            self.delta = None
        self.version += 1
        self.order, self.by_id, self.count, self.full = order, by_id, count, None

    def build_full(self, template: Template, here: str) -> None:
        if self.full is not None:
            return
        if self.order:
            html = "\n".join(self.by_id[mid] for mid in self.order)
        else:
            html = template.render(rows=[], session=_Kind(self.can_act), here=here)
        self.full = sse("board", json.dumps({"html": html, "count": self.count})).encode()


@dataclass(frozen=True)
class LiveView:
    """How one kind of live board is read and rendered.

    ``read(filter, cache)`` (in a worker thread) answers the rows to show and how many rows the
    filter has in all (a paged board shows one page); ``cache`` is the feed's own, made by
    ``new_cache`` and kept between readings. ``here(filter)`` is the page the rows' forms go back to.
    """

    read: Callable[[Any, Any], tuple[list[BoardRow], int]]
    template: Template
    new_cache: Callable[[], Any]
    here: Callable[[Any], str]


@dataclass(eq=False)
class BoardFeed:
    """The board of one filter: read, rendered and handed to its viewers once per interval."""

    flt: Any  # a BoardFilter or a MatchesQuery: frozen, so equal filters share a feed
    hub: BoardHub
    view: LiveView
    viewers: set[Viewer] = field(default_factory=set)
    frame: Frame | None = None
    _next: asyncio.Event = field(default_factory=asyncio.Event)
    _rendered: dict[bool, _Rendered] = field(default_factory=dict)
    _cache: Any = None
    _seq: int = 0

    def __post_init__(self) -> None:
        self._cache = self.view.new_cache()

    async def run(self) -> None:
        """Read, publish, wait; until the last viewer left (then the hub forgets this feed)."""
        try:
            while self.viewers:
                viewers = list(self.viewers)
                try:
                    frame = await run_in_threadpool(self._read, viewers)
                except Exception:  # a bug must not end every viewer's stream silently
                    logger.exception("live board read failed (filter %s)", self.flt)
                    frame = Frame(self._seq, {}, {}, problem="the board could not be read")
                self._publish(frame)
                await asyncio.sleep(self.hub.interval)
        finally:
            self.hub.forget(self)

    def _publish(self, frame: Frame) -> None:
        self.frame = frame
        woken, self._next = self._next, asyncio.Event()
        woken.set()

    async def next_frame(self, viewer: Viewer, *, timeout: float) -> Frame | None:
        """The first frame ``viewer`` has not seen, or None after ``timeout`` seconds without one."""
        while self.frame is None or self.frame.seq <= viewer.seen_seq:
            try:
                await asyncio.wait_for(self._next.wait(), timeout)
            except TimeoutError:
                return None
        viewer.seen_seq = self.frame.seq
        return self.frame

    def _read(self, viewers: list[Viewer]) -> Frame:
        """In a worker thread: every viewer's session (one transaction), the board, the rows' text."""
        self._seq += 1
        self.hub.reads.inc()
        tokens = sorted({v.token for v in viewers})
        try:
            sessions = _sessions(tokens, idle=SessionPolicy.from_settings(self.hub.settings).idle)
            rows, count = self.view.read(self.flt, self._cache)
        except KickoffError as exc:
            return Frame(self._seq, {}, {}, problem=str(exc))
        template, here = self.view.template, self.view.here(self.flt)
        events: dict[bool, tuple[int, bytes | None, bytes | None]] = {}
        for can_act in {s.can_act for s in sessions.values() if s is not None}:
            rendered = self._rendered.setdefault(can_act, _Rendered(can_act))
            if rows != rendered.rows or count != rendered.count:
                rendered.update(rows, count, template, here)
            behind = any(
                v.session.can_act == can_act and v.sent_version < rendered.version - 1 for v in viewers
            )
            if behind or rendered.delta is None:
                rendered.build_full(template, here)
            events[can_act] = (rendered.version, rendered.full, rendered.delta)
        return Frame(self._seq, sessions, events)


@dataclass(frozen=True)
class _Kind:
    """What the rows template asks of a session: whether it may act."""

    can_act: bool


def _sessions(tokens: list[str], *, idle: timedelta) -> dict[str, Session | None]:
    """Each token's live session (None: ended, idle ones too), read in one statement whatever the number
    of viewers, the connection handed back. A stream's readings do not count as use: a board left open
    ends with its idle session.
    """
    try:
        with transaction():
            return sessions_for(tokens, idle=idle)
    finally:
        release_connection()


class BoardHub:
    """The live boards of one API process: a feed per filter with viewers, and the stream caps."""

    def __init__(
        self,
        *,
        settings: KickoffSettings,
        coordination: Callable[[], CoordinationStore],
        reads: PromCounter,
        streams: Gauge,
    ) -> None:
        self.settings = settings
        self.reads = reads
        streams.set_function(lambda: self.open_streams)
        self._coordination = coordination
        self.views: dict[type, LiveView] = {}
        self.interval = settings.console_board_refresh_seconds
        self.per_session = settings.console_streams_per_session
        self.per_process = settings.console_streams_per_process
        self.feeds: dict[Any, BoardFeed] = {}
        self.by_session: Counter[str] = Counter()
        self.open_streams = 0
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def coordination(self) -> CoordinationStore:
        return self._coordination()

    def add_view(self, kind: type, view: LiveView) -> None:
        """Serve the filters of class ``kind`` with ``view``."""
        self.views[kind] = view

    def join(self, flt: Any, token: str, session: Session) -> tuple[BoardFeed, Viewer]:
        """Open a stream of ``flt`` for ``session`` (StreamLimitReached past a cap); ``leave`` closes it."""
        if self.open_streams >= self.per_process:
            raise StreamLimitReached(
                f"this API process serves {self.per_process} live board streams already "
                "(CONSOLE_STREAMS_PER_PROCESS); close one or try again later"
            )
        if self.by_session[token] >= self.per_session:
            raise StreamLimitReached(
                f"this console session has {self.per_session} live board streams open already "
                "(CONSOLE_STREAMS_PER_SESSION); close a tab"
            )
        viewer = Viewer(token=token, session=session)
        feed = self.feeds.get(flt)
        if feed is None:
            feed = self.feeds[flt] = BoardFeed(flt=flt, hub=self, view=self.views[type(flt)])
            feed.viewers.add(viewer)
            task = asyncio.get_running_loop().create_task(feed.run())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            feed.viewers.add(viewer)
        self.by_session[token] += 1
        self.open_streams += 1
        return feed, viewer

    def leave(self, feed: BoardFeed, viewer: Viewer) -> None:
        """Close ``viewer``'s stream (once; later calls do nothing)."""
        if viewer not in feed.viewers:
            return
        feed.viewers.discard(viewer)
        self.open_streams -= 1
        self.by_session[viewer.token] -= 1
        if self.by_session[viewer.token] <= 0:
            del self.by_session[viewer.token]

    def leave_when_collected(self, owner: object, feed: BoardFeed, viewer: Viewer) -> None:
        """Close the stream when ``owner`` (its generator) is collected, even if it never ran."""
        weakref.finalize(owner, self._leave_soon, asyncio.get_running_loop(), feed, viewer)

    def _leave_soon(self, loop: asyncio.AbstractEventLoop, feed: BoardFeed, viewer: Viewer) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: the process is going
            loop.call_soon_threadsafe(self.leave, feed, viewer)

    def forget(self, feed: BoardFeed) -> None:
        if self.feeds.get(feed.flt) is feed:
            del self.feeds[feed.flt]
