"""Listener exit codes and whether each counts as a successful start (the spec's table)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Why a listener run ended; recorded in MatchListenerRecord.exit_code."""

    CLEAN = 0  # clean return
    UNEXPECTED_ERROR = 9  # unexpected exception in the listener
    MAX_HEARTBEATS = 10  # too many consecutive stream heartbeats without an event
    DATA_ERROR = 11  # data / HTTP / JSON error from the feed
    CONNECTION_ERROR = 12  # connection or timeout, after reconnect attempts
    NOT_IN_PROGRESS = 13  # the match is no longer in progress (ended, postponed, cancelled)
    ABANDONED = 14  # recorded by cleanup when the heartbeat went stale; never a live exit
    STOPPED = 15  # recorded when an operator stop ended the run
    CANCELLED = 16  # unexpected cancel (not an operator stop)


#: Exits that end a start successfully; every other exit is a failed start (counted).
SUCCESS_CODES = frozenset({ExitCode.CLEAN, ExitCode.MAX_HEARTBEATS, ExitCode.NOT_IN_PROGRESS})


def is_success(code: int | None) -> bool:
    """Whether an exit code counts as a successful start (None is a clean return)."""
    return code is None or code in SUCCESS_CODES


def exit_code_of(value: object) -> int:
    """The exit code of a body's return value or a ``SystemExit.code``, as Python's exit maps it.

    None is a clean return (0); an int is itself; anything else (a message) is 1, an
    unexpected exit, as ``sys.exit("message")`` makes a process exit 1.
    """
    if value is None:
        return int(ExitCode.CLEAN)
    if isinstance(value, bool) or not isinstance(value, int):
        return 1
    return int(value)


def system_exit_reason(exc: SystemExit) -> str:
    """The exit reason of a body's SystemExit: the code's description, plus its message if any."""
    code = exit_code_of(exc.code)
    if exc.code is None or isinstance(exc.code, int):
        return describe(code)
    return f"{describe(code)}: SystemExit({exc.code!s:.200})"


def describe(code: int | None) -> str:
    """A short human reason for an exit code (for MatchListenerRecord.exit_reason)."""
    if code is None:
        return "clean return"
    try:
        return ExitCode(code).name.lower().replace("_", " ")
    except ValueError:
        return f"unexpected exit {code}"
