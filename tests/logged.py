"""Test helper: put messages into a match's event log as a listener run would (unfenced)."""

from __future__ import annotations

from typing import Any

from listener import log_writer
from listener.event_log import EventLog


def event_log_of(match_id: Any, messages: list[Any] = ()) -> EventLog:  # type: ignore[assignment]
    """The match's EventLog (the process writer) with ``messages`` recorded (then ``append_marker``...)."""
    log = EventLog(
        match_id=str(match_id), writer=log_writer.writer(buffer_limit=100_000, retry_seconds=0.1)
    ).open()
    for message in messages:
        log.record(message)
    return log
