"""Who holds a match's listener: its newest open row, else its start lock's token, else a pending start."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from config.clock import utcnow
from models.coordination import CoordinationStore
from models.listener_record import newest_open_run


def match_holder(match_id: str, *, coordination: CoordinationStore) -> dict[str, Any] | None:
    """Describe whoever holds ``match_id`` (None: nobody).

    ``{"record_id", "host", "pid", "heartbeat_at"}`` of the newest open row when there is one;
    else ``{"token"}`` of the start lock; else ``{"pending": True}`` when only a pending start key
    is set (a start is queued, or one is between its claim and its lock).
    """
    row = newest_open_run(uuid.UUID(match_id))
    if row is not None:
        return {
            "record_id": str(row.id),
            "host": row.host,
            "pid": row.pid,
            "heartbeat_at": row.heartbeat_at.isoformat(),
        }
    token = coordination.locks.start_lock_holder(match_id)
    if token is not None:
        return {"token": token}
    if coordination.barriers.is_pending(match_id):
        return {"pending": True}
    return None


def describe_holder(holder: dict[str, Any]) -> str:
    """One human phrase naming the holder (host/pid of its row, else the lock token)."""
    if "record_id" in holder:
        where = f"host {holder['host'] or '?'} pid {holder['pid'] or '?'}"
        beat = datetime.fromisoformat(holder["heartbeat_at"])
        age = (utcnow() - beat).total_seconds()
        return f"a listener on {where} (row {holder['record_id']}, heartbeat {age:.0f} s ago)"
    if "token" in holder:
        return f"the start lock holder {holder['token']} (no open row)"
    return "a queued or starting listener (pending start key, no lock or open row yet)"
