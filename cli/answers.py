"""Exit codes of the publisher's answers (triggers, runs publish), like the HTTP API's status codes.

| exit | answer | HTTP |
|---|---|---|
| 0 | queued, pending, duplicate | 202 / 200 |
| 1 | any other kickoff error (one line) | 500 |
| 2 | click usage error, unknown id | 400 / 404 |
| 3 | invalid: the request was refused before anything was saved | 422 |
| 4 | conflict with the current state (a filled or expired pick, a dead draft target, no starts left) | 409 |
| 5 | unavailable: retry with the same key (a draft target not delivered, a service down) | 503 |

A bulk listener action too large or whose preview expired is a conflict as well (exit 4).

``publisher_answers`` wraps a command: it turns these errors into their exit code and one line
(on stderr), or with ``--json`` into one JSON object on stdout with ``status`` (``invalid``,
``conflict`` or ``unavailable``), ``error`` and, where known, ``field`` and ``tracking_id``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

from cli.common import echo_json
from config.errors import (
    BulkConflict,
    InvalidRunParams,
    InvalidTimeError,
    InvalidTrigger,
    ServiceUnavailable,
    StartAttemptsExhausted,
    TriggerConflictError,
    TriggerUnavailableError,
    TriggerValidationError,
)

EXIT_INVALID = 3
EXIT_CONFLICT = 4
EXIT_UNAVAILABLE = 5

#: What the --help texts of the publishing commands say about exit codes.
EXIT_CODES_HELP = (
    "Exit codes: 0 queued, pending or duplicate; 2 usage error or unknown job; 3 invalid request (nothing "
    "saved); 4 conflict (filled or expired pick, dead draft target); 5 unavailable (retry with the same "
    "key); 1 any other error."
)

_ANSWERS: tuple[tuple[tuple[type[BaseException], ...], str, int], ...] = (
    ((TriggerValidationError, InvalidRunParams, InvalidTrigger, InvalidTimeError), "invalid", EXIT_INVALID),
    ((TriggerConflictError, StartAttemptsExhausted, BulkConflict), "conflict", EXIT_CONFLICT),
    ((TriggerUnavailableError, ServiceUnavailable), "unavailable", EXIT_UNAVAILABLE),
)


def answer_for(exc: BaseException) -> tuple[str, int] | None:
    """The (status, exit code) of a publisher error, or None for errors this module does not map."""
    for classes, status, code in _ANSWERS:
        if isinstance(exc, classes):
            return status, code
    return None


def publisher_answers(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command (with an ``as_json`` parameter) the publisher's exit codes for its errors."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except Exception as exc:
            if answer_for(exc) is None:
                raise
            answer_and_exit(exc, as_json=bool(kwargs.get("as_json")))

    return wrapper


def answer_and_exit(exc: BaseException, *, as_json: bool, data: dict[str, Any] | None = None) -> NoReturn:
    """Answer ``exc`` (one this module maps) and exit with its code.

    One line on stderr, or with ``as_json`` one JSON object: ``data`` (a command's own fields)
    with ``status``, ``error`` and, where known, ``field`` and ``tracking_id``.
    """
    answer = answer_for(exc)
    if answer is None:
        raise ValueError(f"no answer for {type(exc).__name__}") from exc
    status, code = answer
    if as_json:
        out: dict[str, Any] = {**(data or {}), "status": status, "error": str(exc)}
        if getattr(exc, "field", None) is not None:
            out["field"] = exc.field  # type: ignore[attr-defined]
        if getattr(exc, "tracking_id", None) is not None:
            out["tracking_id"] = exc.tracking_id  # type: ignore[attr-defined]
            out["published"] = False
        echo_json(out)
    else:
        click.echo(f"Error: {exc}", err=True)
    sys.exit(code)
