"""Whether this process reaches the feed now: a listener worker cut from it takes no start.

A host cut from the feed (a black hole or a refusal between it and the provider) keeps its lease,
so no reaper takes its matches; its runs see the silence, reconnect, and give their matches back
once the feed stays unreachable past LISTENER_FEED_LOST_SECONDS (listener.match_listener,
lifecycle.guarded_start). The restart must reach a worker that can stream it, not this host's other
worker, which shares the cut (bench/chaos.py, docs/reliability.md finding 5). So each listener worker
judges the feed like PostgreSQL (lifecycle.db_reach): a thread every PROBE_SECONDS opens a TCP
connection to SPORTRADAR_BASE_URL's host and port and closes it (no request: nothing the provider
counts), skipped while a stream of this process read a feed byte within the period (the streams
prove the feed answers); a connect that fails or waits past HANG_SECONDS closes the start gate
(``ListenerServices.ready_for_starts``) until one answers. A run that gives its match back closes it
at once (``unreachable``). A worker that never reached the feed since it booted is not judged while
its connects are refused (its gate stays open: its runs say why they fail), so a feed that is not up
yet stops no start; a connect that times out (a black hole: a worker restarted on a cut host) is.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from lifecycle.db_reach import HANG_SECONDS, PROBE_SECONDS, ServiceReach
from lifecycle.lease import PeriodicStep
from listener.stream import last_feed_byte_at


def feed_address(base_url: str) -> tuple[str, int]:
    """The host and port a feed URL connects to (the scheme's default port when it names none)."""
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    return parts.hostname or "127.0.0.1", port


def tcp_probe(address: tuple[str, int], *, timeout_seconds: float) -> Callable[[], None]:
    """A probe that opens a TCP connection to ``address`` and closes it (OSError when it cannot)."""

    def probe() -> None:
        with socket.create_connection(address, timeout=timeout_seconds):
            pass

    return probe


class FeedReach(ServiceReach):
    """Whether this process reaches the feed (see the module); thread-safe, ``reachable`` does no I/O."""

    SERVICE = "the feed"

    @staticmethod
    def probe_thread(*, period_seconds: float, step: Callable[[], None]) -> PeriodicStep:
        return _FeedProbeThread(period_seconds=period_seconds, step=step)

    def __init__(
        self,
        *,
        probe: Callable[[], None],
        period_seconds: float = PROBE_SECONDS,
        hang_seconds: float = HANG_SECONDS,
        last_byte_at: Callable[[], float | None] = last_feed_byte_at,
    ) -> None:
        """``last_byte_at``: when a stream of this process last read a feed byte (monotonic)."""
        super().__init__(
            probe=self._proven_or(probe), period_seconds=period_seconds, hang_seconds=hang_seconds
        )
        self._period = period_seconds
        self._last_byte_at = last_byte_at
        self._judged = False  # the feed answered once since boot, or a run found it unreachable

    @classmethod
    def of_url(cls, base_url: str) -> FeedReach:
        """The reach of the feed at ``base_url`` (SPORTRADAR_BASE_URL)."""
        return cls(probe=tcp_probe(feed_address(base_url), timeout_seconds=HANG_SECONDS))

    def _proven_or(self, probe: Callable[[], None]) -> Callable[[], None]:
        def proven_or_probe() -> None:
            last = self._last_byte_at()
            if last is None or time.monotonic() - last > self._period:
                try:
                    probe()
                except TimeoutError:
                    self._judged = True  # a black hole, not a feed that is not up: judged at once
                    raise
            self._judged = True  # answered: from now on a failure closes the gate

        return proven_or_probe

    def reachable(self, now: float | None = None) -> bool:
        """Whether starts may be taken: the feed answers, or was never reached since boot."""
        return super().reachable(now) or not self._judged

    def unreachable(self) -> None:
        """A run of this process gave its match back, its feed unreachable: no start until a probe answers."""
        self._judged = True
        super().unreachable()


class _FeedProbeThread(PeriodicStep):
    THREAD_NAME = "kickoff-feed-probe"
    STEP_NAME = "feed probe"
