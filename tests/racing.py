"""Race one call on many threads released at the same instant (the concurrency tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from models.db import database


def race(
    call: Callable[[Callable[[], Any]], Any], *, callers: int, timeout: float = 60.0
) -> tuple[list[Any], list[Exception]]:
    """Run ``call(go)`` on ``callers`` threads; each calls ``go()`` once it is ready to race, which
    lets them all go at once. Returns the results and the exceptions raised; every thread's
    database connection is closed when its call ends."""
    barrier = threading.Barrier(callers)
    results: list[Any] = []
    errors: list[Exception] = []

    def one() -> None:
        try:
            results.append(call(barrier.wait))
        except Exception as exc:  # returned to the test
            errors.append(exc)
        finally:
            database.close()

    threads = [threading.Thread(target=one) for _ in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return results, errors
