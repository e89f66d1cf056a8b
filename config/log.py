"""kickoff's one log format (text or JSON lines) for the CLI, workers, scheduler and launcher.

Every record carries the Dramatiq message being processed by its thread (actor, message id)
and, where the message names one, the match id; ``LOG_FORMAT=json`` prints one JSON object per
line. Workers get the formatter at process boot (actors.middleware.KickoffLogging), the CLI
from ``configure_logging``. Every URL in a line or a traceback goes through ``mask_url``
(passwords and secret query values as ``***``).
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime
from typing import Any

from config.settings import mask_urls_in

_context = threading.local()

#: Dramatiq's warning for every actor that returns a value without a results backend: kickoff's
#: actors return a small dict for tests and in-process callers, never read from the broker.
_RESULTS_NOISE = "returned a value that is not None"


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
    """Add ``actor``, ``message_id``, ``match_id`` and ``kickoff_message`` to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = log_context()
        for key, value in ctx.items():
            if not hasattr(record, key):
                setattr(record, key, value)
        record.kickoff_message = f"{ctx['actor']}:{ctx['message_id']}" if ctx["message_id"] else "-"
        return True


class DropResultsNoise(logging.Filter):
    """Drop Dramatiq's "returned a value ... discarded" warning (kickoff keeps no results)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return _RESULTS_NOISE not in str(record.msg)


class KickoffFormatter(logging.Formatter):
    """``text``: time level logger [pid thread] (actor msg=.. match=..): message; ``json``: one object."""

    def __init__(self, fmt: str = "text") -> None:
        super().__init__()
        self.kind = fmt

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")

    def format(self, record: logging.LogRecord) -> str:
        message = mask_urls_in(record.getMessage())
        ctx = {k: getattr(record, k, None) for k in ("actor", "message_id", "match_id")}
        if self.kind == "json":
            doc: dict[str, Any] = {
                "time": self.formatTime(record),
                "level": record.levelname,
                "logger": record.name,
                "message": message,
                "pid": record.process,
                "thread": record.threadName,
                **{k: v for k, v in ctx.items() if v},
            }
            if record.exc_info:
                doc["exception"] = mask_urls_in(self.formatException(record.exc_info))
            return json.dumps(doc, default=str)
        where = " ".join(
            part
            for part in (
                ctx["actor"] or "",
                f"msg={ctx['message_id']}" if ctx["message_id"] else "",
                f"match={ctx['match_id']}" if ctx["match_id"] else "",
            )
            if part
        )
        proc = f"[{record.process} {record.threadName}]"
        head = f"{self.formatTime(record)} {record.levelname} {record.name} {proc}"
        line = f"{head}{' (' + where + ')' if where else ''}: {message}"
        if record.exc_info:
            line += "\n" + mask_urls_in(self.formatException(record.exc_info))
        return line


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
