"""The names of every kickoff key in Redis (the package table) and the thresholds a store is built with.

Every concern store (and the tests' in-memory stores) names its keys through ``CoordinationKeys``,
so a key another concern reads (a start checks the start lock, a fenced release the worker lease)
has one name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

DISPATCH_LOCK = "dispatch_upcoming_match_listeners"
SWEEP_LOCK = "sweep_stale_match_listeners"
EPOCH_KEY = "redis_epoch"
STOP_CHANNEL = "listener_stops"
GIVEN_BACK_INDEX = "given_back_runs"
LISTENER_LEASES_INDEX = "worker_leases_judged"


def _key_of(name: str) -> Callable[[CoordinationKeys, object], str]:
    """A key-name method: ``{prefix}{name}{ident}`` for a match, message or lease id."""

    def key(self: CoordinationKeys, ident: object) -> str:
        return f"{self.prefix}{name}{ident}"

    return key


class CoordinationKeys:
    """The names of every kickoff key in Redis, read from ``prefix`` alone (the package table)."""

    prefix: str

    # the prefix, the name, then the match id (message id, lease id)
    pending_key = _key_of("pending_start_match_listener_")
    attempts_key = _key_of("start_match_listener_attempts_")
    exhausted_key = _key_of("start_match_listener_exhausted_")
    start_lock_key = _key_of("start_match_listener_")
    stop_flag_key = _key_of("stop_match_listener_")
    revoked_key = _key_of("revoked_message_")  # of a message id
    worker_lease_key = _key_of("listener_worker_")  # of a lease id
    liveness_lost_key = _key_of("liveness_lost_")  # of a lease id
    liveness_channel = _key_of("listener_worker_alive_")  # a pub/sub channel, of a lease id
    handover_key = _key_of("handover_ready_")
    handover_live_key = _key_of("handover_live_")
    orphan_restart_key = _key_of("orphan_restart_")
    bulk_preview_key = _key_of("bulk_preview_")  # of a confirm token's SHA-256
    degraded_key = _key_of("listener_degraded_")  # of a run's lifecycle row id
    given_back_key = _key_of("given_back_")  # of a run's lifecycle row id
    starts_taken_key = _key_of("starts_taken_")  # of a lease id: a hash, match id -> start lock token

    def tick_key(self, entry: str, slot: str) -> str:
        return f"{self.prefix}scheduler_tick_{entry}_{slot}"

    @property
    def given_back_index(self) -> str:
        """The set of the lifecycle row ids that have a ``given_back_key`` (the reapers' one read)."""
        return self.prefix + GIVEN_BACK_INDEX

    @property
    def listener_leases_index(self) -> str:
        """The set of the listener worker leases that held a liveness signal or noted a start: the
        reapers judge them beside the leases of open rows, until one is found dead or lapsed."""
        return self.prefix + LISTENER_LEASES_INDEX

    @property
    def epoch_key(self) -> str:
        return self.prefix + EPOCH_KEY

    @property
    def stop_channel(self) -> str:
        return self.prefix + STOP_CHANNEL

    @property
    def match_key_families(self) -> tuple[Callable[[object], str], ...]:
        """The key families a match leaves behind (``matches_with_keys``): pending, attempts,
        exhausted and stop flag."""
        return (self.pending_key, self.attempts_key, self.exhausted_key, self.stop_flag_key)


@dataclass(kw_only=True, eq=False, repr=False)
class CoordinationThresholds:
    """The TTLs and the attempt cap a coordination store is built with (keyword-only fields).

    ``CoordinationStore``, each of its concern stores and the tests' in-memory stores take them from here.
    """

    stale_seconds: float = 180.0
    active_max_age_seconds: float = 12 * 3600.0
    attempts_ttl_seconds: float = 12 * 3600.0
    attempt_cap: int = 15
    coordination_lock_seconds: float = 60.0
