"""``models.coordination.StopSignals`` in memory: stop flags, their push, hand-off marks."""

from __future__ import annotations

import queue
from collections.abc import Iterable
from dataclasses import dataclass

from tests.fakes.coordination._memory import MemoryConcern, MemoryRedis, served


class MemorySubscription:
    """A subscription to the fake store's stop channel (``stop_subscription``)."""

    def __init__(self, store: MemoryRedis) -> None:
        self.store = store
        self.messages: queue.Queue[str] = queue.Queue()
        self.closed = False

    def close(self) -> None:
        self.closed = True
        with self.store.mu:
            if self in self.store.subscriptions:
                self.store.subscriptions.remove(self)


@dataclass(eq=False, repr=False)
class MemoryStopSignals(MemoryConcern):
    """The stop signals of the fake store."""

    @served
    def announce_handover(self, match_id: object, *, ttl_seconds: float) -> None:
        self._set(self.handover_key(match_id), "1", ttl=max(1, int(ttl_seconds * 1000)) / 1000)

    @served
    def handovers_ready(self, match_ids: Iterable[object]) -> set[str]:
        return self._set_among(self.handover_key, match_ids)

    @served
    def clear_handovers(self, match_ids: Iterable[object], *, live_too: bool = False) -> None:
        ids = list(match_ids)
        self._delete(*(self.handover_key(m) for m in ids))
        if live_too:
            self._delete(*(self.handover_live_key(m) for m in ids))

    @served
    def mark_live(self, match_id: object, *, ttl_seconds: float) -> None:
        self._set(self.handover_live_key(match_id), "1", ttl=max(1, int(ttl_seconds * 1000)) / 1000)

    @served
    def handovers_live(self, match_ids: Iterable[object]) -> set[str]:
        return self._set_among(self.handover_live_key, match_ids)

    @served
    def set_stop_flag(self, match_id: object, *, ttl_seconds: float = 300.0) -> None:
        self._set(self.stop_flag_key(match_id), "1", ttl=max(1, int(ttl_seconds)))
        for subscription in self.space.subscriptions:
            subscription.messages.put(str(match_id))

    @served
    def stop_subscription(self) -> MemorySubscription:
        subscription = MemorySubscription(self.space)
        self.space.subscriptions.append(subscription)
        return subscription

    def next_stop_message(self, pubsub: MemorySubscription, *, timeout: float) -> str | None:
        self.answer()
        try:
            return pubsub.messages.get(timeout=timeout)
        except queue.Empty:
            return None

    @served
    def clear_stop_flag(self, match_id: object) -> None:
        self._delete(self.stop_flag_key(match_id))

    @served
    def stop_flags_among(self, match_ids: Iterable[object]) -> set[str]:
        return self._set_among(self.stop_flag_key, match_ids)
