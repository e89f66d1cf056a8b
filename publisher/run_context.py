"""The run id of the enclosing recorded run (run_scope), carried in a ContextVar.

``run_scope()`` sets it; trigger_client sends it as ``X-Run-Id`` and triggers link the new
action to that run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token

RUN_ID_HEADER = "X-Run-Id"

current_run_id: ContextVar[str | None] = ContextVar("kickoff_current_run_id", default=None)


def get_run_id() -> str | None:
    """Return the run id of the enclosing run scope, or None outside any run."""
    return current_run_id.get()


def set_run_id(run_id: str | None) -> Token[str | None]:
    """Set the current run id; pass the returned token to ``reset_run_id``."""
    return current_run_id.set(None if run_id is None else str(run_id))


def reset_run_id(token: Token[str | None]) -> None:
    """Restore the run id that was current before ``set_run_id``."""
    current_run_id.reset(token)


@contextmanager
def bound_run_id(run_id: str | None) -> Iterator[None]:
    """Make ``run_id`` the current run id inside the ``with`` block."""
    token = set_run_id(run_id)
    try:
        yield
    finally:
        reset_run_id(token)
