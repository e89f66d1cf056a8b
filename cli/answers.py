"""Exit codes of kickoff's commands, derived from each error's kind like the HTTP API's status codes.

| exit | kind | HTTP |
|---|---|---|
| 0 | queued, pending, duplicate (no error) | 202 / 200 |
| 1 | refused, misconfigured, failed: any other kickoff error (one line) | 403 / 500 |
| 2 | not_found (and click usage errors) | 404 (400) |
| 3 | invalid: the request was refused before anything was saved | 422 |
| 4 | conflict with the current state (a filled or expired pick, no starts left, a claim not waiting) | 409 |
| 5 | unavailable, upstream, limited: retry (a draft target not delivered, a service down) | 503 / 502 / 429 |

``EXIT_OF`` is the one table; the root group's handler (cli.main) uses it for every command.
``publisher_answers`` wraps a command: it turns the invalid, conflict and unavailable kinds into
their exit code and one line (on stderr), or with ``--json`` into one JSON object on stdout with
``status`` (``invalid``, ``conflict`` or ``unavailable``), ``error`` and, where known, ``field``
and ``tracking_id``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

from cli.common import echo_json
from config.errors import ErrorKind, kind_of

#: The exit code of each kind of error (the one table).
EXIT_OF: dict[ErrorKind, int] = {
    ErrorKind.INVALID: 3,
    ErrorKind.NOT_FOUND: 2,
    ErrorKind.CONFLICT: 4,
    ErrorKind.UNAVAILABLE: 5,
    ErrorKind.UPSTREAM: 5,
    ErrorKind.LIMITED: 5,
    ErrorKind.REFUSED: 1,
    ErrorKind.MISCONFIGURED: 1,
    ErrorKind.FAILED: 1,
}

EXIT_INVALID = EXIT_OF[ErrorKind.INVALID]
EXIT_CONFLICT = EXIT_OF[ErrorKind.CONFLICT]
EXIT_UNAVAILABLE = EXIT_OF[ErrorKind.UNAVAILABLE]

#: What the --help texts of the publishing commands say about exit codes.
EXIT_CODES_HELP = (
    "Exit codes: 0 queued, pending or duplicate; 2 usage error or unknown id; 3 invalid request or unknown "
    "job (nothing saved); 4 conflict (filled or expired pick, dead draft target); 5 unavailable (retry with "
    "the same key); 1 any other error."
)

#: The kinds a publishing command answers itself (the status word is the kind's name).
ANSWERED = frozenset({ErrorKind.INVALID, ErrorKind.CONFLICT, ErrorKind.UNAVAILABLE})


def exit_code_of(exc: BaseException) -> int:
    """The exit code of ``exc``: its kind's (EXIT_OF); 1 for an error that is not kickoff's."""
    return EXIT_OF[kind_of(exc)]


def answer_for(exc: BaseException) -> tuple[str, int] | None:
    """The (status, exit code) of a publisher error, or None for errors this module does not answer."""
    kind = kind_of(exc)
    if kind not in ANSWERED:
        return None
    return str(kind), EXIT_OF[kind]


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
