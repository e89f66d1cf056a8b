"""One stop-flag poller per worker process: one MGET per poll interval for every registered listener."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from config.errors import KickoffError
from listener.poller import RegistryPoller
from models.barriers import Barriers

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class StopRegistration:
    """One running listener waiting for an operator stop flag."""

    match_id: str  # internal Match.id
    on_stop: Callable[[], None]  # called (possibly repeatedly) while the flag is set


class StopWatcher(RegistryPoller[StopRegistration]):
    """The process's single stop-flag poller.

    ``tick`` (optional) runs after every poll on the same thread; the lifecycle uses it to
    enforce stop deadlines of bodies that ignore ``request_stop``.
    """

    def __init__(
        self, *, barriers: Barriers, poll_seconds: float, tick: Callable[[], None] | None = None
    ) -> None:
        super().__init__(thread_name="kickoff-stop-watch", step_name="stop watch poll")
        self.barriers = barriers
        self.poll_seconds = poll_seconds
        self.tick = tick

    def period_seconds(self) -> float:
        return self.poll_seconds

    def step(self) -> None:
        try:
            self.poll_once()
        except Exception:
            logger.exception("stop watch: poll failed")
        if self.tick is not None:
            self.tick()  # runs even when the poll failed (a failing tick is logged by the poller)

    def poll_once(self) -> set[str]:
        """Read every registered match's stop flag in one MGET; notify the flagged ones."""
        regs = self.snapshot()
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
