"""The process-wide limit on listener work that talks to PostgreSQL at once.

Starts, shutdown writes and the listener threads' own queries (the Match row, status changes,
the pipeline's questions) of one process share ``listener_db_concurrency`` slots, so a worker
with a thousand listeners opens at most that many connections however many act at once.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_gate: threading.BoundedSemaphore | None = None


def db_gate(size: int) -> threading.BoundedSemaphore:
    """The process's gate, created with ``size`` slots on first use (later sizes are ignored)."""
    global _gate
    with _lock:
        if _gate is None:
            _gate = threading.BoundedSemaphore(size)
        return _gate
