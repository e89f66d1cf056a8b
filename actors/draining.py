"""A listener worker's drain: once its graceful shutdown begins, its consumers take no more starts.

The shutdown queues a successor start for each of its running matches (lifecycle.runtime
``shutdown_all``); a consumer of the stopping worker that took one would hold it until the worker
exits. So the Redis broker's ``match_listeners`` consumer fetches nothing while draining and the
RabbitMQ one hands every delivery back (actors.rabbitmq), and the other workers run them.

The same holds while the process's worker lease is not held (``gate_starts_on``): a worker cut
from REDIS_URL but not from the broker would take the starts the other workers' reapers send for
its own fenced runs and fail each at its first lock, leaving the match's pending key set until
the sweep reclaims it minutes later (found by bench/chaos.py, seed 38).

Starts the Redis consumer fetched in its last batch but had not handed to the worker yet go back to
the queue as soon as it stops taking starts, and when it closes (``DrainableConsumer``): Dramatiq
leaves them in the worker's ack set until the broker's heartbeat timeout (docs/reliability.md
finding 15; a killed worker's are requeued by the reapers, actors.fetched_starts).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import dramatiq

from config.errors import KickoffError

logger = logging.getLogger(__name__)

#: Set from a listener worker's graceful shutdown on; cleared when a worker boots.
_draining = threading.Event()
#: How long a draining consumer waits before it looks again (it takes nothing meanwhile).
DRAINING_IDLE_SECONDS = 0.5
#: Besides draining, whether this process can run a start now (its worker lease is held); None: always.
_ready: Callable[[], bool] | None = None


def stop_taking_starts() -> None:
    """From now on this process's ``match_listeners`` consumers take no message (a shutdown)."""
    _draining.set()


def resume_taking_starts() -> None:
    """This process's ``match_listeners`` consumers take messages again (a worker booted)."""
    _draining.clear()


def gate_starts_on(ready: Callable[[], bool] | None) -> None:
    """Take starts only while ``ready()`` holds (cheap, never raising: the worker lease is held); None:
    no gate."""
    global _ready
    _ready = ready


def taking_starts() -> bool:
    """Whether this process's ``match_listeners`` consumers take messages: not draining, and ready."""
    ready = _ready
    return not _draining.is_set() and (ready is None or ready())


#: Longest idle wait (ms) of a ``match_listeners`` consumer between two fetches from the Redis
#: broker (``DrainableConsumer``). Dramatiq's idle consumer backs off up to the worker timeout (1 s
#: by default); a start a reaper sends for a dead worker's match waited that long on an idle worker:
#: half a second on average of a takeover. At 100 ms (jittered down to half) an idle listener worker
#: fetches ten to twenty times a second (one Lua call each; docs/scaling.md); the starts its own
#: process sends are fetched at once (``starts_sent``).
LISTENER_CONSUMER_IDLE_MS = 100
#: The timeout (ms) actors.broker gives Dramatiq's own Redis consumer: its back-off sleep after a
#: fetch that found nothing is at most this; the idle wait is ``DrainableConsumer``'s, which a start
#: sent from this process ends at once.
INNER_CONSUMER_IDLE_MS = 1

#: Set when this process sent starts (``starts_sent``): its idle consumer fetches at once.
_starts_sent = threading.Event()


def starts_sent() -> None:
    """This process just sent starts (a reaper's restart of a dead worker's matches, a hand-off): its
    idle ``match_listeners`` consumer fetches now, not at its next poll, so a takeover's start does not
    wait out the idle poll on the process that saw the death (usually the one that runs it)."""
    _starts_sent.set()


class DrainableConsumer(dramatiq.Consumer):
    """A Redis broker consumer that fetches nothing while the process drains (``stop_taking_starts``),
    and whose idle wait between two fetches ends at once when this process sends starts."""

    def __init__(
        self,
        consumer: dramatiq.Consumer,
        *,
        idle_seconds: float = LISTENER_CONSUMER_IDLE_MS / 1000,
        broker_errors: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> None:
        self.consumer = consumer
        self.idle_seconds = idle_seconds
        #: The broker's error translation (actors.broker ``broker_errors``) around a hand-back's requeue.
        self.broker_errors = broker_errors

    def __iter__(self) -> DrainableConsumer:
        return self

    def __next__(self) -> Any:
        if not taking_starts():
            self._hand_back_prefetched()
            time.sleep(DRAINING_IDLE_SECONDS)
            return None
        _starts_sent.clear()  # before the fetch: a start sent from here on ends the wait below
        message = next(self.consumer)
        if message is None:
            _starts_sent.wait(self.idle_seconds * random.uniform(0.5, 1.0))
        return message

    def ack(self, message: Any) -> None:
        self.consumer.ack(message)

    def nack(self, message: Any) -> None:
        self.consumer.nack(message)

    def requeue(self, messages: Iterable[Any]) -> None:
        self.consumer.requeue(messages)

    def close(self) -> None:
        self._hand_back_prefetched()
        self.consumer.close()

    def _hand_back_prefetched(self) -> None:
        """Requeue the starts the inner consumer fetched but has not handed to the worker yet.

        Dramatiq's Redis consumer fetches a batch (up to its prefetch) and keeps what it has not
        returned yet in its ``message_cache``, already in the broker's ack set of this worker.
        Nothing requeues that batch when the worker stops taking starts or shuts down. Those starts
        would wait out the broker's heartbeat timeout (60 s) before another worker could run them
        (one way a start given back as its host is deployed can wait that long: docs/reliability.md
        finding 15). Called on the consumer's thread, the only one that touches the cache while it
        runs, and by ``close`` once it stopped.
        """
        # the Redis consumer's batch: a name without an underscore, but documented nowhere
        # (tests/lifecycle/test_start_gate.py fails if it goes); RabbitMQ's consumer has none
        cache = getattr(self.consumer, "message_cache", None)
        if not cache:
            return
        messages = [dramatiq.Message.decode(data) for data in cache if data is not None]
        try:
            with self.broker_errors():
                self.consumer.requeue(messages)
        except KickoffError as exc:  # kept: tried again at the next look, else the heartbeat timeout's
            logger.warning("could not hand %d prefetched starts back to the broker: %s", len(messages), exc)
            return
        cache.clear()
        logger.info("handed %d prefetched starts back to the broker for the other workers", len(messages))
