"""One stop-flag poller per worker process: one MGET per poll interval for every registered listener."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from config.errors import KickoffError
from models.barriers import Barriers

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class StopRegistration:
    """One running listener waiting for an operator stop flag."""

    match_id: str  # internal Match.id
    on_stop: Callable[[], None]  # called (possibly repeatedly) while the flag is set


class StopWatcher:
    """The process's single stop-flag poller.

    ``tick`` (optional) runs after every poll on the same thread; the lifecycle uses it to
    enforce stop deadlines of bodies that ignore ``request_stop``.
    """

    def __init__(
        self, *, barriers: Barriers, poll_seconds: float, tick: Callable[[], None] | None = None
    ) -> None:
        self.barriers = barriers
        self.poll_seconds = poll_seconds
        self.tick = tick
        self._regs: set[StopRegistration] = set()
        self._mu = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def register(self, reg: StopRegistration) -> None:
        with self._mu:
            self._regs.add(reg)
        self.start()

    def unregister(self, reg: StopRegistration) -> None:
        with self._mu:
            self._regs.discard(reg)

    def poll_once(self) -> set[str]:
        """Read every registered match's stop flag in one MGET; notify the flagged ones."""
        with self._mu:
            regs = list(self._regs)
        if not regs:
            return set()
        try:
            flagged = self.barriers.stop_flags_among({r.match_id for r in regs})
        except KickoffError as exc:
            logger.warning("stop watch: reading %d stop flags failed: %s", len(regs), exc)
            return set()
        for reg in regs:
            if reg.match_id in flagged:
                try:
                    reg.on_stop()
                except Exception:
                    logger.exception("match %s: stop callback failed", reg.match_id)
        return flagged

    def start(self) -> None:
        """Start the thread if it is not running (idempotent)."""
        with self._mu:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="kickoff-stop-watch", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self.poll_seconds)
            self._wake.clear()
            if self._stopping:
                break
            try:
                self.poll_once()
                if self.tick is not None:
                    self.tick()
            except Exception:
                logger.exception("stop watch poll failed")
