"""One stop watcher per worker process: stops pushed over Redis pub/sub, and a poll (one MGET) as fallback.

An operator stop sets the match's stop flag and publishes the match id on the stop channel
(models.coordination.stop_signals). The push thread hears it at once and checks the flag (a stale push never
stops a later run); the poll reads every registered match's flag each interval, so a stop
still lands when the push was missed (Redis reconnecting, a subscription not yet made).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from config.backoff import backoff_seconds
from config.errors import KickoffError
from lifecycle.poller import RegistryPoller
from models.coordination import StopSignals

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
        self, *, stops: StopSignals, poll_seconds: float, tick: Callable[[], None] | None = None
    ) -> None:
        super().__init__(thread_name="kickoff-stop-watch", step_name="stop watch poll")
        self.stops = stops
        self.poll_seconds = poll_seconds
        self.tick = tick
        self._push_thread: threading.Thread | None = None
        self._push_mu = threading.Lock()

    def start(self) -> None:
        """Start the poll thread and the push thread (idempotent)."""
        super().start()
        with self._push_mu:
            if self._push_thread is not None and self._push_thread.is_alive():
                return
            self._push_thread = threading.Thread(target=self._listen, name="kickoff-stop-push", daemon=True)
            self._push_thread.start()

    def register(self, reg: StopRegistration) -> None:
        """Watch ``reg``'s match, and stop its run at once if its flag is set already: a stop pushed
        after the run's row opened and before this registration found no run to stop here, and would
        otherwise wait for the poll."""
        super().register(reg)
        self.stop_pushed(reg.match_id)

    def _listen(self) -> None:
        """Follow the stop channel until stopped; resubscribe with backoff after a Redis error. Each
        (re)subscription is followed by one poll: a stop pushed while no subscription listened (the
        process starting, Redis restarting) would otherwise wait for the next poll."""
        failures = 0
        while not self._stopping:
            pubsub = None
            try:
                pubsub = self.stops.stop_subscription()
                failures = 0
                self.poll_once()
                while not self._stopping:
                    match_id = self.stops.next_stop_message(pubsub, timeout=1.0)
                    if match_id is not None:
                        self.stop_pushed(match_id)
            except KickoffError as exc:
                logger.warning("stop watch: stop channel lost (%s); polling until it is back", exc)
                failures += 1
                time.sleep(backoff_seconds(failures, base=0.5, cap=10.0))
            except Exception:
                logger.exception("stop watch: stop channel failed")
                failures += 1
                time.sleep(backoff_seconds(failures, base=0.5, cap=10.0))
            finally:
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except Exception:
                        logger.debug("closing the stop subscription failed", exc_info=True)

    def stop_pushed(self, match_id: str) -> None:
        """A stop was pushed for ``match_id``: stop its run here if its flag is still set."""
        regs = [r for r in self.snapshot() if r.match_id == match_id]
        if not regs:
            return
        try:
            if match_id not in self.stops.stop_flags_among([match_id]):
                return
        except KickoffError as exc:
            logger.warning("match %s: stop pushed, flag unreadable (%s): the poll decides", match_id, exc)
            return
        for reg in regs:
            try:
                reg.on_stop()
            except Exception:
                logger.exception("match %s: stop callback failed", reg.match_id)

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
            flagged = self.stops.stop_flags_among({r.match_id for r in regs})
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
