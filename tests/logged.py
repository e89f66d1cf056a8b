"""Test helper: put messages into a match's event log as a listener run would (unfenced)."""

from __future__ import annotations

from typing import Any

from listener.event_log import EventLog
from listener.log_writer import LogWriter


def event_log_of(match_id: Any, messages: list[Any] = ()) -> EventLog:  # type: ignore[assignment]
    """The match's EventLog (its own writer) with ``messages`` recorded; call ``append_marker`` etc. on it."""
    log = EventLog(match_id=str(match_id), writer=LogWriter(buffer_limit=100_000, retry_seconds=0.1)).open()
    for message in messages:
        log.record(message)
    return log
