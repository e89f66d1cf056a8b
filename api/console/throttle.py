"""Refused console sign-ins per client address: past the limit in a minute, sign-in is refused (429).

Kept in the API process's memory (each of API_WORKERS counts on its own); the client address is
the connection's, or X-Forwarded-For's when `kickoff serve --proxy-headers` trusts the proxy.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

#: The window the limit counts in.
WINDOW_SECONDS = 60.0

#: Addresses remembered at most; beyond, the one refused longest ago is forgotten (bounded memory).
MAX_ADDRESSES = 10_000


class SignInThrottle:
    """Counts refused sign-ins per address over the last minute, and the sign-ins being checked.

    ``admit`` before looking at the key, then ``refused`` or ``passed``: sign-ins being checked
    count against the limit too, so a burst of concurrent guesses cannot all pass the check
    before the first is counted.
    """

    def __init__(self, failures_per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = failures_per_minute
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._checking: dict[str, int] = {}
        self._lock = threading.Lock()

    def _recent(self, address: str, now: float) -> deque[float] | None:
        failures = self._failures.get(address)
        if failures is None:
            return None
        while failures and failures[0] <= now - WINDOW_SECONDS:
            failures.popleft()
        if not failures:
            del self._failures[address]
            return None
        return failures

    def admit(self, address: str) -> int | None:
        """None: ``address`` may try now (then ``refused`` or ``passed``); else seconds until it may."""
        now = self._clock()
        with self._lock:
            failures = self._recent(address, now) or deque()
            checking = self._checking.get(address, 0)
            if len(failures) + checking >= self.limit:
                if len(failures) < self.limit:
                    return 1  # the rest of the limit is being checked right now
                return max(1, int(failures[-self.limit] + WINDOW_SECONDS - now) + 1)
            self._checking[address] = checking + 1
            return None

    def _checked(self, address: str) -> None:
        left = self._checking.get(address, 1) - 1
        if left > 0:
            self._checking[address] = left
        else:
            self._checking.pop(address, None)

    def passed(self, address: str) -> None:
        """The admitted sign-in of ``address`` was not refused."""
        with self._lock:
            self._checked(address)

    def refused(self, address: str) -> int:
        """The admitted sign-in of ``address`` was refused; returns its refusals in the last minute."""
        now = self._clock()
        with self._lock:
            self._checked(address)
            failures = self._recent(address, now)
            if failures is None:
                if len(self._failures) >= MAX_ADDRESSES:
                    self._failures.popitem(last=False)
                failures = self._failures[address] = deque()
            self._failures.move_to_end(address)
            failures.append(now)
            if len(failures) > self.limit:
                failures.popleft()
            return len(failures)
