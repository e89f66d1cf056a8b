"""kickoff's one log format (text or JSON lines) for every process, rendered by structlog.

kickoff logs through the standard library (``logging.getLogger(__name__)``, lazy ``%s`` arguments);
structlog's ``ProcessorFormatter`` renders each record through one processor chain: the time
(UTC, milliseconds), level, logger, process and thread, the Dramatiq message the thread processes
(actor, message id and, where the message names one, the match id), the current span's
``trace_id`` and ``span_id`` while tracing is on and a span is current (config.tracing), every URL
masked (``mask_url``: passwords and secret query values as ``***``, in the traceback too). Then
``LOG_FORMAT=json`` renders one JSON object per line and ``text`` the line
``time level logger [pid thread] (actor msg=.. match=.. trace=..): message``. Workers get the
formatter at process boot (actors.middleware.LogContextMiddleware), the CLI from ``configure_logging``.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime
from typing import Any

import structlog

from config.settings import mask_urls_in
from config.spans import current_ids

_context = threading.local()

#: Dramatiq's warning for every actor that returns a value without a results backend: kickoff's
#: actors return a small dict for tests and in-process callers, never read from the broker.
_RESULTS_NOISE = "returned a value that is not None"
#: The fields a line names its work by, in the order they are written.
CONTEXT_FIELDS = ("actor", "message_id", "match_id", "trace_id", "span_id")


def set_log_context(*, actor: str | None, message_id: str | None, match_id: str | None) -> None:
    """Name the message this thread processes (None: none) on every record it logs."""
    _context.actor = actor
    _context.message_id = message_id
    _context.match_id = match_id


def log_context() -> dict[str, str | None]:
    """The actor, message id and match id of this thread's current message (None when none)."""
    return {
        "actor": getattr(_context, "actor", None),
        "message_id": getattr(_context, "message_id", None),
        "match_id": getattr(_context, "match_id", None),
    }


class LogContextFilter(logging.Filter):
    """Put the thread's message (actor, message id, match id) and the current span's ids on a record.

    Run where the record is made (a handler's filter runs in the logging thread), so a record handed
    to another thread keeps the context it was logged in.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in log_context().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        if not hasattr(record, "trace_id"):
            ids = current_ids()
            record.trace_id, record.span_id = ids if ids is not None else (None, None)
        return True


class DropResultsNoise(logging.Filter):
    """Drop Dramatiq's "returned a value ... discarded" warning (kickoff keeps no results)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return _RESULTS_NOISE not in str(record.msg)


def _record_fields(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """time, level, logger, message, pid, thread and the context fields that are set, in that order."""
    record: logging.LogRecord = event["_record"]
    out: dict[str, Any] = {
        "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
        "level": record.levelname,
        "logger": record.name,
        "message": mask_urls_in(str(event.get("event", ""))),
        "pid": record.process,
        "thread": record.threadName,
    }
    for key in CONTEXT_FIELDS:
        value = getattr(record, key, None)
        if value:
            out[key] = value
    if "exception" in event:
        out["exception"] = mask_urls_in(str(event["exception"]))
    return out


def _text(_logger: Any, _name: str, event: dict[str, Any]) -> str:
    """The text line: ``time level logger [pid thread] (actor msg=.. match=.. trace=..): message``."""
    where = " ".join(
        part
        for part in (
            event.get("actor") or "",
            f"msg={event['message_id']}" if event.get("message_id") else "",
            f"match={event['match_id']}" if event.get("match_id") else "",
            f"trace={event['trace_id']}" if event.get("trace_id") else "",
        )
        if part
    )
    head = f"{event['time']} {event['level']} {event['logger']} [{event['pid']} {event['thread']}]"
    line = f"{head}{' (' + where + ')' if where else ''}: {event['message']}"
    if "exception" in event:
        line += "\n" + event["exception"]
    return line


def _json(_logger: Any, _name: str, event: dict[str, Any]) -> str:
    return json.dumps(event, default=str)


class KickoffFormatter(structlog.stdlib.ProcessorFormatter):
    """kickoff's formatter: ``text`` or ``json`` (see the module docstring)."""

    def __init__(self, fmt: str = "text") -> None:
        self.kind = fmt
        super().__init__(
            processors=[
                structlog.processors.format_exc_info,
                _record_fields,
                _json if fmt == "json" else _text,
            ],
            use_get_message=True,
        )


def install_formatter(fmt: str) -> None:
    """Put kickoff's formatter and filters on every handler of the root logger (a Dramatiq worker's pipe)."""
    for handler in logging.getLogger().handlers:
        handler.setFormatter(KickoffFormatter(fmt))
        if not any(isinstance(f, LogContextFilter) for f in handler.filters):
            handler.addFilter(LogContextFilter())
        if not any(isinstance(f, DropResultsNoise) for f in handler.filters):
            handler.addFilter(DropResultsNoise())


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The CLI's stderr handler (a second configure_logging replaces it, never doubles it)."""


def configure_logging(*, level: int, fmt: str) -> None:
    """Log to stderr at ``level`` in kickoff's format (the CLI)."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(old)
    handler = _StderrHandler()
    handler.setFormatter(KickoffFormatter(fmt))
    handler.addFilter(LogContextFilter())
    handler.addFilter(DropResultsNoise())
    root.addHandler(handler)
    root.setLevel(level)
