"""The scheduler process: Periodiq's clock over the periodic table, with one send per slot cluster-wide.

Periodiq's ``Scheduler`` wakes at each cron slot and calls ``send_with_options`` on every due
entry. Here each entry is a ``TickSender`` that first claims a per-slot key in Redis
(``SET NX``; the tick key of models.coordination): a scheduler restarted inside a minute,
or a second scheduler process, finds the slot claimed and sends nothing. The dispatch's own
pending keys are the second line of defence.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from typing import Any

import pendulum
import periodiq

from config.errors import RedisUnavailable
from config.settings import KickoffSettings
from models.coordination import CoordinationStore, SchedulerTicks, tick_slot
from scheduler.table import PeriodicEntry, entries_for

logger = logging.getLogger(__name__)

#: Sends one tick: (actor kwargs, scheduled_at ISO string) -> None.
TickSend = Callable[[dict[str, Any], str], None]


def slot_of(scheduled_at: str) -> str:
    """The minute slot (UTC, ``YYYYmmddTHHMM``) a tick belongs to."""
    return tick_slot(pendulum.parse(scheduled_at))


class TickSender:
    """A periodic entry as Periodiq's Scheduler sees it (``options['periodic']``, ``send_with_options``)."""

    def __init__(
        self,
        entry: PeriodicEntry,
        *,
        send: TickSend,
        ticks: SchedulerTicks,
        tick_ttl_seconds: float,
    ) -> None:
        self.entry = entry
        self.send = send
        self.ticks = ticks
        self.tick_ttl_seconds = tick_ttl_seconds
        self.options = {"periodic": periodiq.cron(entry.cron)}
        self.owner = f"{socket.gethostname()}:{os.getpid()}"

    def __str__(self) -> str:
        return self.entry.name

    def claim(self, scheduled_at: str) -> bool:
        """SET NX this slot's key; False when another scheduler (or our previous life) sent it."""
        return self.ticks.claim_tick(
            self.entry.name, pendulum.parse(scheduled_at), owner=self.owner, ttl_seconds=self.tick_ttl_seconds
        )

    def send_with_options(self, *, scheduled_at: str, **_: Any) -> bool:
        """Send the tick unless its slot was already claimed; True when sent."""
        try:
            claimed = self.claim(scheduled_at)
        except RedisUnavailable as exc:
            logger.error("tick %s at %s not sent: %s", self.entry.name, scheduled_at, exc)
            return False
        if not claimed:
            logger.info("tick %s at %s already sent by another scheduler", self.entry.name, scheduled_at)
            return False
        self.send(dict(self.entry.kwargs), scheduled_at)
        logger.info("tick %s at %s sent", self.entry.name, scheduled_at)
        return True


def build_senders(
    settings: KickoffSettings, *, broker: Any, coordination: CoordinationStore
) -> list[TickSender]:
    """One TickSender per entry of ``settings.app_env``, sending through ``broker``'s actors."""
    senders = []
    for entry in entries_for(settings.app_env):
        actor = broker.get_actor(entry.actor)

        def send(kwargs: dict[str, Any], scheduled_at: str, actor: Any = actor) -> None:
            actor.send_with_options(kwargs=kwargs, scheduled_at=scheduled_at)

        senders.append(
            TickSender(
                entry,
                send=send,
                ticks=coordination.ticks,
                tick_ttl_seconds=settings.scheduler_tick_ttl_seconds,
            )
        )
    return senders


def run_scheduler() -> None:
    """Run the scheduler until the process is killed (``kickoff scheduler``)."""
    # importing actors configures the actor runtime from the settings read at process start: only
    # the scheduler process does it, not every importer of this module (the CLI, tests)
    import actors  # noqa: F401, PLC0415
    from actors.actor_runtime import current  # noqa: PLC0415  as above

    rt = current()
    settings: KickoffSettings = rt.settings  # the scheduler reads no listener setting
    senders = build_senders(settings, broker=rt.broker, coordination=rt.coordination)
    if not senders:
        logger.error("no periodic entry for app_env %s", settings.app_env)
        return
    for s in senders:
        logger.info("periodic %-24s %s -> %s %s", s.entry.cron, s.entry.name, s.entry.actor, s.entry.kwargs)
    scheduler = periodiq.Scheduler(actors=senders)
    scheduler.schedule()
    scheduler.loop()
