"""Stop signals: an operator's stop of a running listener and a graceful hand-off's marks (REDIS_URL).

An operator stop sets the match's stop flag and publishes the match id on the pub/sub channel
``listener_stops``, so a running listener stops at once; the stop-flag poll is the fallback. A
graceful shutdown's successor start announces it waits for the start lock (``handover_ready``),
and the first run to send a live byte marks it (``handover_live``): a handed-over run stops then.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from models.coordination._redis import RedisConcern, text, translated


@dataclass(eq=False, repr=False)
class StopSignals(RedisConcern):
    """Stop flags, their push channel, and graceful hand-off marks."""

    # -- graceful hand-off -----------------------------------------------------------

    @translated
    def announce_handover(self, match_id: object, *, ttl_seconds: float) -> None:
        """A successor start of ``match_id`` waits for the start lock (the stopping run may stop now)."""
        self.client.set(self.handover_key(match_id), "1", px=max(1, int(ttl_seconds * 1000)))

    @translated
    def handovers_ready(self, match_ids: Iterable[object]) -> set[str]:
        """Which of ``match_ids`` have a successor waiting, in one round trip (MGET)."""
        return self._set_among(self.handover_key, match_ids)

    @translated
    def clear_handovers(self, match_ids: Iterable[object], *, live_too: bool = False) -> None:
        """Forget the waiting marks of ``match_ids`` (before a hand-off: none is left from an older one);
        ``live_too``: their first-live marks as well."""
        ids = list(match_ids)
        keys = [self.handover_key(m) for m in ids]
        if live_too:
            keys += [self.handover_live_key(m) for m in ids]
        if keys:
            self.client.delete(*keys)

    @translated
    def mark_live(self, match_id: object, *, ttl_seconds: float) -> None:
        """A run of ``match_id`` sent its first live byte: a run handed over to it may close its stream."""
        self.client.set(self.handover_live_key(match_id), "1", px=max(1, int(ttl_seconds * 1000)))

    @translated
    def handovers_live(self, match_ids: Iterable[object]) -> set[str]:
        """Which of ``match_ids`` have a run that sent its first live byte (``mark_live``), one MGET."""
        return self._set_among(self.handover_live_key, match_ids)

    # -- stop flags ------------------------------------------------------------------

    @translated
    def set_stop_flag(self, match_id: object, *, ttl_seconds: float = 300.0) -> None:
        """Ask the running listener of ``match_id`` to stop (exit 15): the flag, then a push."""
        pipe = self.client.pipeline(transaction=False)
        pipe.set(self.stop_flag_key(match_id), "1", ex=max(1, int(ttl_seconds)))
        pipe.publish(self.stop_channel, str(match_id))
        pipe.execute()

    def stop_subscription(self) -> Any:
        """A redis-py PubSub subscribed to the stop channel (its own connection)."""
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        self._subscribe(pubsub)
        return pubsub

    @translated
    def _subscribe(self, pubsub: Any) -> None:
        pubsub.subscribe(self.stop_channel)

    @translated
    def next_stop_message(self, pubsub: Any, *, timeout: float) -> str | None:
        """The next match id pushed on the stop channel within ``timeout`` seconds, or None."""
        message = pubsub.get_message(timeout=timeout)
        if message is None or message.get("type") != "message":
            return None
        return text(message["data"])

    @translated
    def clear_stop_flag(self, match_id: object) -> None:
        self.client.delete(self.stop_flag_key(match_id))

    @translated
    def stop_flags_among(self, match_ids: Iterable[object]) -> set[str]:
        """Return which of ``match_ids`` have a stop flag, in one round trip (MGET)."""
        return self._set_among(self.stop_flag_key, match_ids)
