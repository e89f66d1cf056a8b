"""Whether this process reaches PostgreSQL now: a listener worker cut from it takes no start.

A start's first steps read PostgreSQL (its stored message id, the guards, the open rows) before
it takes the match's start lock. A worker that cannot reach PostgreSQL (a refusal fails at once, a
black hole only at the connection's deadline: tens of seconds) would take a takeover's start from
the ``match_listeners`` queue and hold it until then, while a worker elsewhere could have streamed
the match; the start then frees its pending key and the match waits for a reaper's or the
dispatch's next restart (found by bench/chaos.py, seed 62: 41-59 s without a stream,
docs/reliability.md finding 6). So a thread of each listener worker asks PostgreSQL ``SELECT 1``
every PROBE_SECONDS, and the worker takes starts only while the last probe answered and none has
waited longer than HANG_SECONDS (``reachable``; actors.draining gates its consumers on it). A start
that meets PostgreSQL unreachable says so at once (``unreachable``): the gate closes until the next
probe answers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from lifecycle.lease import PeriodicStep

logger = logging.getLogger(__name__)

#: How often the probe asks PostgreSQL.
PROBE_SECONDS = 0.5
#: A probe without an answer for this long means PostgreSQL is not reached (a black hole: the
#: statement itself fails only at its connection's deadline). ``SELECT 1`` answers in milliseconds;
#: seconds leave room for a loaded machine.
HANG_SECONDS = 2.0


class ServiceReach:
    """A probe's verdict on one service, and its thread (``start``); thread-safe, ``reachable`` never does
    I/O. lifecycle.feed_reach judges the feed with it."""

    #: The service's name in log lines.
    SERVICE = "PostgreSQL"

    @staticmethod
    def probe_thread(*, period_seconds: float, step: Callable[[], None]) -> PeriodicStep:
        """The probe's thread (named after the service)."""
        return _ProbeThread(period_seconds=period_seconds, step=step)

    def __init__(
        self,
        *,
        probe: Callable[[], None],
        period_seconds: float = PROBE_SECONDS,
        hang_seconds: float = HANG_SECONDS,
    ) -> None:
        """``probe``: one round trip to the service, raising when it fails."""
        self._probe = probe
        self.hang_seconds = hang_seconds
        self._mu = threading.Lock()
        self._answered: bool | None = None  # whether the last probe answered (None: none finished yet)
        self._asked_at: float | None = None  # a probe in flight since (monotonic)
        self._hang_told = False  # the hung probe in flight was logged
        self._thread = self.probe_thread(period_seconds=period_seconds, step=self.probe_once)

    def start(self) -> None:
        """Probe once now (so a worker that boots with PostgreSQL takes starts at once), then every period."""
        threading.Thread(target=self.probe_once, name="kickoff-db-probe-first", daemon=True).start()
        self._thread.start()

    def stop(self) -> None:
        self._thread.stop()

    def reachable(self, now: float | None = None) -> bool:
        """Whether starts may be taken: the last probe answered and none has waited past the bound."""
        now = time.monotonic() if now is None else now
        with self._mu:
            answered = self._answered is True
            hung = self._asked_at is not None and now - self._asked_at >= self.hang_seconds
            tell = hung and answered and not self._hang_told
            self._hang_told = self._hang_told or tell
        if tell:
            logger.warning(
                "%s not answering (a probe waited %g s): no starts", self.SERVICE, self.hang_seconds
            )
        return answered and not hung

    def finds_away(self, now: float | None = None) -> bool:
        """Whether the last probe found the service away (it failed, or one has waited past the bound);
        False before any probe finished."""
        now = time.monotonic() if now is None else now
        with self._mu:
            hung = self._asked_at is not None and now - self._asked_at >= self.hang_seconds
            return self._answered is False or hung

    def unreachable(self) -> None:
        """A step of this process found the service unreachable: take no start until a probe answers."""
        with self._mu:
            self._answered = False

    def probe_once(self) -> None:
        """Ask the service once and record the answer (a probe already in flight: nothing)."""
        with self._mu:
            if self._asked_at is not None:
                return
            self._asked_at = time.monotonic()
        answered = False
        try:
            self._probe()
            answered = True
        except Exception as exc:  # any failure means "not reached"; the next probe asks again
            logger.debug("%s probe failed: %s", self.SERVICE, exc)
        finally:
            with self._mu:
                was = self._answered
                self._answered, self._asked_at, self._hang_told = answered, None, False
            if was is not None and was != answered:
                logger.warning(
                    "%s %s: %s",
                    self.SERVICE,
                    "reached again" if answered else "not reached",
                    "taking starts again" if answered else "taking no start until it answers",
                )


class DatabaseReach(ServiceReach):
    """Whether this process reaches PostgreSQL (``probe``: ``models.db.check_connection`` plus handing the
    connection back)."""

    SERVICE = "PostgreSQL"


class _ProbeThread(PeriodicStep):
    THREAD_NAME = "kickoff-db-probe"
    STEP_NAME = "PostgreSQL probe"
