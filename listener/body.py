"""The narrow interface between the listener lifecycle (row, heartbeat, stop) and a listener body.

``run_match_listener`` builds a ListenerContext, instantiates the body named by the
``listener_body`` setting and calls ``run``; the body returns an exit code (listener.exit_codes).
When a stop is requested (operator stop, lost start lock, worker shutdown) the lifecycle sets
``ctx.stop_requested`` and calls ``body.request_stop()`` from another thread; the body must
then return promptly (within a second), e.g. by closing its stream connection. Before each write
the body asks ``ctx.may_write()``: a process that was paused past its worker lease learns it
there, before its stop request arrives; a thread already past that check is stopped by the
store itself: every write carries ``ctx.fence_token`` and is refused (FencedWrite) once a
successor took a newer one. A body may say why it ended in an ``exit_reason``
attribute (e.g. ``feed answered HTTP 404 at ...``); the lifecycle row records that reason
instead of the exit code's name, and with a true ``database_lost`` attribute that it ended because
PostgreSQL did not answer: a run that ends so before its first live byte is started again at once
(lifecycle.guarded_start), on a worker that reaches PostgreSQL; with a true ``feed_lost`` that it gave
its match back because its feed stayed unreachable past LISTENER_FEED_LOST_SECONDS: started again at
once, on a worker that reaches the feed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from config.settings import MatchListenerEnvironment


@dataclass(frozen=True)
class ListenerContext:
    """What a listener body is given for one run."""

    match_id: str  # internal Match.id
    record_id: str | None  # lifecycle row id; None in a dry run without a row
    is_test: bool  # srsim clone: Match.status is owned by the simulator, not the stream
    settings: MatchListenerEnvironment
    stop_requested: threading.Event = field(default_factory=threading.Event)
    #: False once the run's worker lease ran out (the process was paused or cut off): a successor
    #: may be running, so the body must write nothing more (archive, Match.status) and return.
    may_write: Callable[[], bool] = lambda: True
    #: The run's fencing token (models.fence), carried by every write it makes: the store refuses
    #: it (FencedWrite) once a newer run of the match took a newer one. None: never fenced.
    fence_token: int | None = None
    #: Called once, from the body's thread, at the run's first live byte (its first feed message that is
    #: not a resume's replay): a run handed over to this one closes its stream, and a run that took its
    #: match over records how long the takeover took (lifecycle.takeover).
    on_live: Callable[[], None] = lambda: None
    #: Whether this process reaches the feed now (lifecycle.feed_reach: False once its last probe found
    #: the feed away, even in a worker booted on a cut host, whose start gate a refusal does not close):
    #: a run that never went live gives its match back at its first failed connect once this is False,
    #: instead of retrying until LISTENER_FEED_LOST_SECONDS (docs/reliability.md finding 13).
    feed_reachable: Callable[[], bool] = lambda: True
    #: Set once a graceful shutdown hands the run's row and start lock to a successor while its stream
    #: stays open (lifecycle.runtime ``shutdown_all``): the body records nothing more but keeps reading
    #: until it is asked to stop (at the successor's first live byte); the successor resumes where the
    #: event log ends, and a write of this run's the fence refuses ends its recording, not its run.
    handing_over: threading.Event = field(default_factory=threading.Event)
    #: Held by the body while it takes one message (records it, or hands it to its pipelined writer); a
    #: hand-over sets ``handing_over``, takes it once, then waits for the body's ``drain_recorded`` (if it
    #: has one: listener.match_listener), so no message is left recorded but unprocessed when the
    #: successor takes its fencing token (a body that does neither is handed over all the same: the
    #: fence decides).
    recording: threading.Lock = field(default_factory=threading.Lock)


class ListenerBody(Protocol):
    """A listener body: follows one match until the game ends or a stop is requested."""

    def run(self, ctx: ListenerContext) -> int:
        """Follow the match; return an ExitCode value."""
        ...

    def request_stop(self) -> None:
        """Called from another thread: make ``run`` return soon."""
        ...


def body_exit_reason(body: Any) -> str | None:
    """The reason a body gives for its last exit (its ``exit_reason`` text), or None when it gives none."""
    reason = getattr(body, "exit_reason", None)
    return (reason.strip()[:1000] or None) if isinstance(reason, str) else None


def body_lost_database(body: Any) -> bool:
    """Whether a body says its last run ended because PostgreSQL did not answer (``database_lost``)."""
    return getattr(body, "database_lost", False) is True


def body_lost_feed(body: Any) -> bool:
    """Whether a body says its last run gave its match back: the feed stayed unreachable (``feed_lost``)."""
    return getattr(body, "feed_lost", False) is True
