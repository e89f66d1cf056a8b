"""Refused console sign-ins per account (and per client address where it is the client's): past the
limit in a minute, sign-in is refused (429); an operator lifts a lock (``unlock``, audited).

A sign-in counts in its buckets: ``account:<digest>`` (the first 16 hex of the presented key's
SHA-256: every sign-in with that key, whoever sends it) and, only when `kickoff serve
--proxy-headers` takes the client's address from a trusted proxy (API_PROXY_HEADERS), also
``address:<client>``. Without trusted forwarded headers every client behind a proxy has the
proxy's address, so an address bucket would let one client lock everyone out: it is not used.
The refusals live in PostgreSQL (models.sign_in_refusals), shared by every API process; the
sign-ins being checked count too (in this process), so a burst of concurrent guesses gets no
more than the limit checked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from api.keys import hash_key
from config.clock import utcnow
from models import sign_in_refusals as store
from models.audit import AuditContext
from models.boundary import transaction
from models.sign_in_refusals import Lockout

#: The window the limit counts in.
WINDOW_SECONDS = 60.0

#: The characters of the key's digest an account bucket keeps (enough to tell keys apart).
DIGEST_CHARS = 16


def account_bucket(key: str) -> str:
    """The bucket of every sign-in with ``key`` (a digest: never the key)."""
    return "account:" + hash_key(key.strip())[:DIGEST_CHARS]


class SignInThrottle:
    """Counts refused sign-ins per bucket over the last minute, and the sign-ins being checked.

    ``admit`` before looking at the key, then ``refused`` or ``passed`` with the same buckets.
    """

    def __init__(
        self,
        failures_per_minute: int,
        *,
        trust_address: bool,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.limit = failures_per_minute
        self.trust_address = trust_address
        self._clock = clock
        self._checking: dict[str, int] = {}
        self._lock = threading.Lock()

    def buckets(self, key: str, address: str) -> tuple[str, ...]:
        """The buckets a sign-in with ``key`` from ``address`` counts in."""
        account = account_bucket(key)
        return (account, f"address:{address}") if self.trust_address else (account,)

    def _since(self) -> datetime:
        return self._clock() - timedelta(seconds=WINDOW_SECONDS)

    def admit(self, buckets: Sequence[str]) -> int | None:
        """None: the sign-in may be checked now (then ``refused`` or ``passed``); else seconds to wait."""
        with self._lock:  # one admission at a time, so the counts it reads are the ones it checks
            since = self._since()
            counts = store.recent_counts(buckets, since=since)
            wait = 0
            for bucket in buckets:
                refused, checking = counts.get(bucket, 0), self._checking.get(bucket, 0)
                if refused + checking < self.limit:
                    continue
                if refused < self.limit:
                    wait = max(wait, 1)  # the rest of the limit is being checked right now
                    continue
                oldest_counted = store.nth_newest(bucket, self.limit, since=since)
                left = 1 if oldest_counted is None else (oldest_counted - since).total_seconds()
                wait = max(wait, int(left) + 1)
            if wait:
                return wait
            for bucket in buckets:
                self._checking[bucket] = self._checking.get(bucket, 0) + 1
            return None

    def _checked(self, buckets: Sequence[str]) -> None:
        for bucket in buckets:
            left = self._checking.get(bucket, 1) - 1
            if left > 0:
                self._checking[bucket] = left
            else:
                self._checking.pop(bucket, None)

    def passed(self, buckets: Sequence[str]) -> None:
        """The admitted sign-in was not refused."""
        with self._lock:
            self._checked(buckets)

    def refused(self, buckets: Sequence[str]) -> int:
        """The admitted sign-in was refused; returns the most refusals of its buckets in the last minute."""
        with self._lock:
            try:
                store.record_refusal(buckets, at=self._clock())
                counts = store.recent_counts(buckets, since=self._since())
            finally:
                self._checked(buckets)
        return max(counts.values(), default=0)


def locked(*, limit: int, clock: Callable[[], datetime] = utcnow) -> list[Lockout]:
    """The buckets refused sign-in now: ``limit`` refusals or more in the last minute."""
    return store.lockouts(since=clock() - timedelta(seconds=WINDOW_SECONDS), at_least=limit)


def unlock(bucket: str | None, *, audit: AuditContext) -> int:
    """Lift the lock of ``bucket`` (None: of every bucket) by deleting its refusals, audited
    (console.unlock) in the same transaction; how many refusals went."""
    with transaction():
        cleared = store.clear(bucket)
        audit.record("console.unlock", "console", bucket or "*", before={"refusals": cleared})
    return cleared
